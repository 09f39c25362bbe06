// Command pulsar compares, against one in-process Pulsar broker
// (pulsartest), a plain pulsar-client-go receive-and-ack loop with the
// Boulevard Pulsar source feeding a pipeline whose handler does nothing but
// return its message, and prints the throughput of each and their ratio.
//
// Each run seeds a fresh topic with N messages (flag -n) of -payload bytes,
// stored as batched entries of -batch messages (as a batching producer would
// write them), then consumes the topic from the earliest position until
// every message has been received and acknowledged:
//
//   - plain: one pulsar-client-go consumer, Receive then Ack for each
//     message, with the client's default receiver queue (1000), and again
//     with a queue of -initial (default 100): as far ahead as the source's
//     whole permit window, client queue included, reads;
//   - source: pipeline.New with the Pulsar source (producer concurrency
//     -stages, flow window -initial/-initial÷2/-initial÷2, by default
//     100/50/50) and -processors processors
//     whose handler returns the message as is; every message is acked by
//     the source's acknowledger.
//
// The clock runs from the subscribe (or pipeline start) until the last
// message has been handled and the consumer closed (closing flushes the
// acks the client still groups). Messages the broker still counts as
// unacknowledged after a run are reported, not fatal: pulsar-client-go
// (v0.21.0) loses the acks of a timed flush that races the consumer's Close.
// Runs alternate between the sides (flag -rounds, each) after one warm-up
// run of each, and the medians are compared.
//
// Both sides share the broker, the client and its options, and use the
// same consumer options (Shared, earliest position, default ack grouping)
// except what the source owns: the receiver queue (derived from the
// window, half of it by default: docs/pulsar.md, "Flow control"; hence the
// plain loop's second run with a queue of the whole window), the message
// channel (the source's own, unbuffered) and the consumer name.
//
// Usage (from the bench directory):
//
//	go run ./pulsar -n 200000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// config is one workload.
type config struct {
	N          int    // messages per run
	Payload    int    // bytes per message
	Batch      int    // messages per stored entry
	Rounds     int    // measured runs per side
	Stages     int    // producer stages of the source
	Processors int    // processors of the pipeline
	Initial    int    // flow window Initial of the source (Threshold = Refill = Initial/2)
	Only       string // run only the side of this name, or those whose names start with it
}

func main() {
	var cfg config
	flag.IntVar(&cfg.N, "n", 200_000, "messages per run")
	flag.IntVar(&cfg.Payload, "payload", 100, "payload bytes per message")
	flag.IntVar(&cfg.Batch, "batch", 100, "messages per stored (batched) entry")
	flag.IntVar(&cfg.Rounds, "rounds", 3, "measured runs per side")
	flag.IntVar(&cfg.Stages, "stages", 1, "producer stages of the source")
	flag.IntVar(&cfg.Processors, "processors", runtime.GOMAXPROCS(0), "processors of the pipeline")
	flag.IntVar(&cfg.Initial, "initial", producer.DefaultFlowInitial, "the source's flow window Initial (Threshold = Refill = Initial/2), and the second plain loop's receiver queue")
	flag.StringVar(&cfg.Only, "only", "", "run only the side with this name, or the sides whose names start with it (for profiling)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured runs to this file")
	traceFile := flag.String("trace", "", "write an execution trace of the whole command to this file (go tool trace)")
	flag.Parse()
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pulsar bench:", err)
			os.Exit(1)
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "pulsar bench:", err)
			os.Exit(1)
		}
		defer func() {
			trace.Stop()
			_ = f.Close()
		}()
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pulsar bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "pulsar bench:", err)
			os.Exit(1)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if err := compare(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pulsar bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// side is one way of consuming a topic; it returns once every message has
// been handled and acknowledged.
type side struct {
	name string
	run  func(ctx context.Context, client pulsar.Client, topic string, cfg config) error
}

// result is one side's measured runs.
type result struct {
	name  string
	rates []float64
	lost  int64 // messages handled but left unacknowledged at the broker
}

// unacked returns how many messages of topic the broker still counts as
// unacknowledged once a side has finished, after giving the acks in flight
// a moment to arrive. Every message was received and handled (each side
// counts them); a non-zero result means acknowledgements were lost, which
// pulsar-client-go (v0.21.0) does when its timed ack flush runs while the
// consumer is closing (the flush's acks reach the broker after the
// consumer's close and are ignored; the broker would redeliver those
// messages). It is reported rather than failing the run.
func unacked(b *pulsartest.Broker, topic string) int64 {
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := b.Backlog(topic, "bench")
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r result) median() float64 {
	s := slices.Clone(r.rates)
	slices.Sort(s)
	return s[len(s)/2]
}

func compare(ctx context.Context, cfg config, out io.Writer) error {
	broker, err := pulsartest.Start(ctx, pulsartest.Options{})
	if err != nil {
		return err
	}
	defer broker.Close()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: broker.URL(), Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer client.Close()

	sides := []side{{"plain loop, queue 1000", plainLoop(1000)}}
	if cfg.Initial != 1000 {
		sides = append(sides, side{fmt.Sprintf("plain loop, queue %d", cfg.Initial), plainLoop(cfg.Initial)})
	}
	sides = append(sides, side{"boulevard source", sourcePipeline})
	if cfg.Only != "" {
		exact := slices.ContainsFunc(sides, func(s side) bool { return s.name == cfg.Only })
		sides = slices.DeleteFunc(sides, func(s side) bool {
			if exact {
				return s.name != cfg.Only
			}
			return !strings.HasPrefix(s.name, cfg.Only)
		})
		if len(sides) == 0 {
			return fmt.Errorf("no side named %q…", cfg.Only)
		}
	}
	results := make([]result, len(sides))
	topicSeq := 0
	for round := -1; round < cfg.Rounds; round++ { // round -1 warms up
		for i, s := range sides {
			topicSeq++
			topic := fmt.Sprintf("bench-%d", topicSeq)
			if err := seed(ctx, broker, topic, cfg); err != nil {
				return err
			}
			start := time.Now()
			if err := s.run(ctx, client, topic, cfg); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			rate := float64(cfg.N) / time.Since(start).Seconds()
			results[i].lost += unacked(broker, topic)
			results[i].name = s.name
			if round >= 0 {
				results[i].rates = append(results[i].rates, rate)
			}
		}
	}
	fmt.Fprintf(out, "pulsar: %d msgs of %d B in entries of %d, %d rounds, GOMAXPROCS %d, source stages %d, processors %d, flow %+v\n",
		cfg.N, cfg.Payload, cfg.Batch, cfg.Rounds, runtime.GOMAXPROCS(0), cfg.Stages, cfg.Processors, producer.Flow{Initial: cfg.Initial}.WithDefaults())
	for _, r := range results {
		fmt.Fprintf(out, "  %-24s median %10.0f msgs/s   runs %v\n", r.name, r.median(), rounded(r.rates))
		if r.lost > 0 {
			fmt.Fprintf(out, "  %-24s %d acks lost when a consumer closed (pulsar-client-go: a timed ack flush racing Close)\n", r.name, r.lost)
		}
	}
	if len(results) < 2 {
		return nil
	}
	src := results[len(results)-1].median()
	for _, r := range results[:len(results)-1] {
		fmt.Fprintf(out, "  source / %-22s %.2f\n", r.name, src/r.median())
	}
	return nil
}

func rounded(rs []float64) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = int(r)
	}
	return out
}

// seed stores cfg.N messages on topic in batched entries.
func seed(ctx context.Context, b *pulsartest.Broker, topic string, cfg config) error {
	payload := make([]byte, cfg.Payload)
	msgs := make([]pulsartest.Message, 0, cfg.Batch)
	for i := 0; i < cfg.N; i += cfg.Batch {
		msgs = msgs[:0]
		for j := i; j < min(i+cfg.Batch, cfg.N); j++ {
			msgs = append(msgs, pulsartest.Message{Payload: payload})
		}
		if _, err := b.PublishBatch(ctx, topic, msgs...); err != nil {
			return err
		}
	}
	return nil
}

// plainLoop is the hand-written consumer: Receive, Ack, until N.
func plainLoop(queue int) func(ctx context.Context, client pulsar.Client, topic string, cfg config) error {
	return func(ctx context.Context, client pulsar.Client, topic string, cfg config) error {
		c, err := client.Subscribe(pulsar.ConsumerOptions{
			Topic:                       topic,
			SubscriptionName:            "bench",
			Type:                        pulsar.Shared,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			ReceiverQueueSize:           queue,
		})
		if err != nil {
			return err
		}
		defer c.Close()
		for range cfg.N {
			m, err := c.Receive(ctx)
			if err != nil {
				return err
			}
			if err := c.Ack(m); err != nil {
				return err
			}
		}
		return nil
	}
}

// sourcePipeline consumes the topic with the Pulsar source in a pipeline
// whose handler returns each message unchanged.
func sourcePipeline(ctx context.Context, client pulsar.Client, topic string, cfg config) error {
	var handled atomic.Int64
	all := make(chan struct{})
	n := int64(cfg.N)
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name: "bench",
		Producer: producer.Options[[]byte]{
			Concurrency: cfg.Stages,
			Flow:        producer.Flow{Initial: cfg.Initial},
			Source: bpulsar.New(bpulsar.Options{
				Client:       client,
				Topics:       []string{topic},
				Subscription: "bench",
				Consumer:     pulsar.ConsumerOptions{SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest},
			}),
		},
		Processors: processor.Options[[]byte, []byte]{
			Concurrency: cfg.Processors,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				if handled.Add(1) == n {
					close(all)
				}
				return m.Data, nil
			},
		},
	})
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	select {
	case <-all:
	case <-p.Done():
		return fmt.Errorf("pipeline stopped early: %v", p.Err())
	}
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return p.Stop(stopCtx)
}
