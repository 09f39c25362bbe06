// Command kafka runs a Boulevard pipeline on a Kafka topic.
//
// By default it starts an in-process Kafka cluster (kfake, three brokers on
// 127.0.0.1), seeds a topic with temperature readings and consumes them:
//
//	go run ./examples/kafka
//	go run ./examples/kafka -n 100000 -members 3 -v
//	go run ./examples/kafka -http 127.0.0.1:8080 -linger   # metrics, lag and dashboard, kept open after the run
//
// With -brokers it talks to a real Kafka instead (for example the one of
// examples/docker-compose.yml), producing the readings first unless
// -produce=false:
//
//	docker compose -f examples/docker-compose.yml up -d kafka
//	go run ./examples/kafka -brokers 127.0.0.1:9092
//
// Each record is "sensor,celsius" keyed by sensor. Processors parse it (a few
// readings are malformed and fail; with the default failure policy their
// offsets are committed past, so they never stall a partition), and a
// batcher averages the readings per sensor. The program stops once it has
// handled the n records it produced (or on Ctrl-C), drains the pipeline,
// which commits the group's offsets, and prints what it saw.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/examples/internal/monitor"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

type config struct {
	brokers    string
	topic      string
	group      string
	n          int
	partitions int
	members    int
	produce    bool
	strategy   string
	verbose    bool
	// sourceStats prints the Kafka source's stats (members, claims,
	// committed offsets, lag) once every record is handled; -v sets it.
	sourceStats bool
	// monitor holds -http and -linger.
	monitor monitor.Flags
}

func main() {
	var cfg config
	flag.StringVar(&cfg.brokers, "brokers", "", "comma-separated host:port of a real Kafka; empty starts an in-process cluster")
	flag.StringVar(&cfg.topic, "topic", "readings", "topic to read")
	flag.StringVar(&cfg.group, "group", "boulevard-example", "consumer group")
	flag.IntVar(&cfg.n, "n", 10000, "records to produce, and to wait for")
	flag.IntVar(&cfg.partitions, "partitions", 6, fmt.Sprintf("partitions of the in-process topic (1 to %d)", maxPartitions))
	flag.IntVar(&cfg.members, "members", 2, "consumer-group members (producer stages)")
	flag.BoolVar(&cfg.produce, "produce", true, "produce the n records before consuming")
	flag.StringVar(&cfg.strategy, "rebalance", kafka.RebalanceCooperativeSticky, "range, roundrobin, sticky or cooperative-sticky")
	flag.BoolVar(&cfg.verbose, "v", false, "log at debug level to stderr, and print the source's stats")
	cfg.monitor.Register(flag.CommandLine)
	flag.Parse()
	cfg.sourceStats = cfg.verbose

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// maxPartitions is the largest -partitions of the in-process topic: each
// partition is a feed of its own, with its own permit window.
const maxPartitions = 1024

// run sets up the cluster (or connects to the given one), produces, consumes
// and reports to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.n < 0 {
		return fmt.Errorf("-n must be ≥ 0 (0: run until interrupted), got %d", cfg.n)
	}
	log := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	brokers := splitBrokers(cfg.brokers)
	if len(brokers) == 0 && (cfg.partitions < 1 || cfg.partitions > maxPartitions) {
		// The in-process cluster would take 0 or less (and a count past
		// int32, which wraps) as its default, and a huge count as memory.
		return fmt.Errorf("-partitions must be 1 to %d, got %d", maxPartitions, cfg.partitions)
	}
	if len(brokers) == 0 {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(int32(cfg.partitions), cfg.topic),
			kfake.GroupMinSessionTimeout(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("start in-process cluster: %w", err)
		}
		defer cluster.Close()
		brokers = cluster.ListenAddrs()
		fmt.Fprintf(out, "in-process Kafka cluster on %s, topic %q with %d partitions\n", strings.Join(brokers, ","), cfg.topic, cfg.partitions)
	}

	scfg := sarama.NewConfig()
	scfg.Version = sarama.V3_0_0_0
	scfg.ClientID = "boulevard-example"
	if cfg.produce && cfg.n > 0 {
		start := time.Now()
		if err := produce(brokers, scfg, cfg.topic, cfg.n); err != nil {
			return err
		}
		fmt.Fprintf(out, "produced %d readings in %s\n", cfg.n, time.Since(start).Round(time.Millisecond))
	}

	scfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	scfg.Consumer.Group.Session.Timeout = 6 * time.Second
	src, err := kafka.New(kafka.Options{
		Brokers:       brokers,
		GroupID:       cfg.group,
		Topics:        []string{cfg.topic},
		InitialOffset: kafka.OffsetEarliest,
		Rebalance:     cfg.strategy,
		Config:        scfg,
		// No Logger: the source logs through the pipeline's logger.
	})
	if err != nil {
		return err
	}
	// Options print with their credentials (SASL, TLS keys) left out.
	log.Debug("kafka source", slog.Any("options", src.Options()))

	var st stats
	st.sensors = map[string]*sensor{}
	allDone := make(chan struct{})
	var closeOnce sync.Once
	count := func() {
		if cfg.n > 0 && int(st.handled.Add(1)) == cfg.n {
			closeOnce.Do(func() { close(allDone) })
		}
	}
	p, err := pipeline.New(pipeline.Options[[]byte, reading]{
		Name:     "readings",
		Logger:   log,
		Producer: producer.Options[[]byte]{Source: src, Concurrency: cfg.members},
		Processors: processor.Options[[]byte, reading]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) (reading, error) {
				r, err := parse(m.Data)
				if err != nil {
					return r, err
				}
				m.SetBatchKey(r.sensor)
				return r, nil
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[[]byte]) {
				for range failed {
					st.failed.Add(1)
					count()
				}
			},
		},
		Batchers: []batcher.Options[reading]{{
			Name:         "default",
			BatchSize:    100,
			BatchTimeout: 200 * time.Millisecond,
			Handle: func(_ context.Context, batch []*message.Message[reading], info message.BatchInfo) error {
				st.add(info.BatchKey, batch)
				for range batch {
					count()
				}
				return nil
			},
		}},
	})
	if err != nil {
		return err
	}
	obs := observe.New(observe.Options{})
	if err := obs.Add(p); err != nil {
		return err
	}
	if err := obs.AddKafka(src); err != nil {
		return err
	}
	srv, err := cfg.monitor.Serve(obs, out)
	if err != nil {
		return err
	}
	defer srv.Close(ctx) // after the report, for as long as -linger says
	start := time.Now()
	if err := p.Start(ctx); err != nil {
		return err
	}
	select {
	case <-allDone:
	case <-ctx.Done():
	case <-p.Done():
	}
	elapsed := time.Since(start)
	if cfg.sourceStats {
		printSourceStats(out, src.Stats())
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Stop(stopCtx); err != nil {
		return err
	}
	st.print(out, elapsed)
	return nil
}

// printSourceStats prints, per group member, its generation and, per
// claimed partition, the committed offset, high-water mark and lag.
func printSourceStats(out io.Writer, st kafka.Stats) {
	for _, m := range st.Members {
		fmt.Fprintf(out, "member %s (%s): generation %d, %d rebalance(s), %d commit(s), %d failed\n",
			m.Stage, m.MemberID, m.GenerationID, m.Rebalances, m.Commits, m.CommitErrors)
		for _, p := range m.Partitions {
			fmt.Fprintf(out, "  %s/%d: committed %d, high water %d, lag %d, in flight %d\n",
				p.Topic, p.Partition, p.Committed, p.HighWater, p.Lag, p.InFlight)
		}
	}
}

func splitBrokers(s string) []string {
	var out []string
	for b := range strings.SplitSeq(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// produce writes n readings "sensor,celsius" keyed by sensor; every 500th is
// malformed.
func produce(brokers []string, base *sarama.Config, topic string, n int) error {
	cfg := *base
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Flush.Messages = 500
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	ap, err := sarama.NewAsyncProducer(brokers, &cfg)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	var errs []error
	var wg sync.WaitGroup
	wg.Go(func() {
		for range ap.Successes() {
		}
	})
	wg.Go(func() {
		for e := range ap.Errors() {
			errs = append(errs, e)
		}
	})
	for i := range n {
		s := fmt.Sprintf("sensor-%d", i%7)
		v := fmt.Sprintf("%s,%.1f", s, 15+float64(i%100)/10)
		if i%500 == 499 {
			v = s + ",n/a"
		}
		ap.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(s), Value: sarama.StringEncoder(v),
			Headers: []sarama.RecordHeader{{Key: []byte("unit"), Value: []byte("celsius")}}}
	}
	ap.AsyncClose()
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("produce: %d errors, first: %w", len(errs), errs[0])
	}
	return nil
}

type reading struct {
	sensor  string
	celsius float64
}

var errMalformed = errors.New("malformed reading")

func parse(b []byte) (reading, error) {
	s, v, ok := strings.Cut(string(b), ",")
	if !ok {
		return reading{}, fmt.Errorf("%w: %q", errMalformed, b)
	}
	c, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return reading{}, fmt.Errorf("%w: %q", errMalformed, b)
	}
	return reading{sensor: s, celsius: c}, nil
}

type sensor struct {
	n   int
	sum float64
}

type stats struct {
	handled atomic.Int64
	failed  atomic.Int64
	mu      sync.Mutex
	sensors map[string]*sensor
}

func (s *stats) add(key string, batch []*message.Message[reading]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sensors[key]
	if se == nil {
		se = &sensor{}
		s.sensors[key] = se
	}
	for _, m := range batch {
		se.n++
		se.sum += m.Data.celsius
	}
}

func (s *stats) print(out io.Writer, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.sensors))
	for k := range s.sensors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		se := s.sensors[k]
		fmt.Fprintf(out, "%-9s %6d readings, mean %.2f °C\n", k, se.n, se.sum/float64(se.n))
	}
	h := s.handled.Load()
	fmt.Fprintf(out, "handled %d records (%d malformed, committed past) in %s: %.0f records/s\n",
		h, s.failed.Load(), elapsed.Round(time.Millisecond), float64(h)/elapsed.Seconds())
}
