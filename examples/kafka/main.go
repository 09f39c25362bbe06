// Command kafka runs a Boulevard pipeline on a Kafka topic.
//
// By default it starts an in-process Kafka cluster (kfake, three brokers on
// 127.0.0.1), seeds a topic with temperature readings and consumes them:
//
//	go run ./examples/kafka
//	go run ./examples/kafka -n 100000 -members 3 -v
//	go run ./examples/kafka -http 127.0.0.1:2113 -linger   # metrics, lag and dashboard, kept open after the run
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
// handled the n records it produced (or on Ctrl-C or SIGTERM), drains the
// pipeline, which commits the group's offsets, and prints what it saw; when
// interrupted, it also says how many records were left.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/examples/internal/interrupt"
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
	flag.IntVar(&cfg.n, "n", 10000, fmt.Sprintf("records to produce, and to wait for (0 to %d; 0: until interrupted)", maxRecords))
	flag.IntVar(&cfg.partitions, "partitions", 6, fmt.Sprintf("partitions of the in-process topic (1 to %d)", maxPartitions))
	flag.IntVar(&cfg.members, "members", 2, fmt.Sprintf("consumer-group members (producer stages), 1 to %d", maxMembers))
	flag.BoolVar(&cfg.produce, "produce", true, "produce the n records before consuming")
	flag.StringVar(&cfg.strategy, "rebalance", kafka.RebalanceCooperativeSticky, "range, roundrobin, sticky or cooperative-sticky")
	flag.BoolVar(&cfg.verbose, "v", false, "log at debug level to stderr, and print the source's stats")
	cfg.monitor.Register(flag.CommandLine)
	flag.Parse()
	cfg.sourceStats = cfg.verbose

	// Ctrl-C or SIGTERM cancels ctx: the program stops producing, or drains
	// the pipeline, and reports.
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kafka example:", err)
		os.Exit(1)
	}
}

// maxPartitions is the largest -partitions of the in-process topic: each
// partition is a feed of its own, with its own permit window.
const maxPartitions = 1024

// maxRecords is the largest -n: the in-process cluster keeps every record
// in memory.
const maxRecords = 10_000_000

// maxMembers is the largest -members: each member is a producer stage.
const maxMembers = producer.MaxConcurrency

// rebalanceStrategies are the values of -rebalance.
var rebalanceStrategies = []string{kafka.RebalanceRange, kafka.RebalanceRoundRobin, kafka.RebalanceSticky, kafka.RebalanceCooperativeSticky}

// check reports the first flag that holds a value the program cannot run
// with, naming it.
func (cfg config) check() error {
	switch {
	case cfg.n < 0 || cfg.n > maxRecords:
		return fmt.Errorf("-n must be 0 to %d (0: run until interrupted), got %d", maxRecords, cfg.n)
	case cfg.members < 1 || cfg.members > maxMembers:
		return fmt.Errorf("-members must be 1 to %d, got %d", maxMembers, cfg.members)
	case strings.TrimSpace(cfg.topic) == "":
		return errors.New("-topic must not be empty")
	case strings.TrimSpace(cfg.group) == "":
		return errors.New("-group must not be empty")
	case !slices.Contains(rebalanceStrategies, cfg.strategy):
		return fmt.Errorf("-rebalance must be one of %s, got %q", strings.Join(rebalanceStrategies, ", "), cfg.strategy)
	}
	for i, b := range splitBrokers(cfg.brokers) {
		if strings.Contains(b, "@") {
			return fmt.Errorf("-brokers must be host:port, without user information: broker %d has some (not shown)", i+1)
		}
	}
	return nil
}

// run sets up the cluster (or connects to the given one), produces, consumes
// and reports to out. When ctx is cancelled while it produces, it says how
// many records it produced and returns without consuming; while it
// consumes, it drains the pipeline and says how many records were left.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if err := cfg.check(); err != nil {
		return err
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
		sent, err := produce(ctx, brokers, scfg, cfg.topic, cfg.n)
		if err != nil {
			return err
		}
		if sent < cfg.n {
			fmt.Fprintf(out, "interrupted while producing: produced %d of %d readings, consumed none\n", sent, cfg.n)
			return nil
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
	// Adding is setup, not the work an interrupt stops: StatsTimeout bounds it.
	if err := obs.Add(context.WithoutCancel(ctx), p); err != nil {
		return err
	}
	if err := obs.AddKafka(context.WithoutCancel(ctx), src); err != nil {
		return err
	}
	srv, err := cfg.monitor.Serve(ctx, obs, out)
	if err != nil {
		return err
	}
	defer srv.Close(ctx) // after the report, for as long as -linger says
	start := time.Now()
	if err := p.Start(ctx); err != nil {
		return err
	}
	// The source's own logs only show with -v: say here, once, that it
	// cannot reach the cluster, while the pipeline keeps retrying (until
	// producer.Restart gives up, which stops the pipeline).
	poll := time.NewTicker(statusPoll)
	defer poll.Stop()
	warned := false
wait:
	for {
		select {
		case <-allDone:
			break wait
		case <-ctx.Done():
			break wait
		case <-p.Done():
			break wait
		case <-poll.C:
			if err := failing(p.SourceStatus()); err != nil && !warned {
				warned = true
				fmt.Fprintf(out, "the source is failing, retrying: %v\n", err)
			}
		}
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
	if h := st.handled.Load(); ctx.Err() != nil && cfg.n > 0 && h < int64(cfg.n) {
		fmt.Fprintf(out, "interrupted: %d of %d records not handled; the group's next run resumes after the committed offsets\n", int64(cfg.n)-h, cfg.n)
	}
	return nil
}

// statusPoll is how often run looks at the producer stages' status while
// it waits.
const statusPoll = 500 * time.Millisecond

// failing returns the last error of a producer stage whose latest runs
// all failed, or nil.
func failing(stages []producer.StageStatus) error {
	for _, s := range stages {
		if s.ConsecutiveFailures > 0 && s.LastError != nil {
			return s.LastError
		}
	}
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

// produceTimeout bounds each network wait of the producer (dial, read,
// write, metadata refresh), so that brokers that do not answer fail the
// run within seconds instead of sarama's 30s per attempt.
const produceTimeout = 5 * time.Second

// produce writes n readings "sensor,celsius" keyed by sensor; every 500th is
// malformed. It returns the number of readings handed to the producer: n,
// or fewer when ctx ended first (then what was handed over is flushed
// before it returns).
func produce(ctx context.Context, brokers []string, base *sarama.Config, topic string, n int) (int, error) {
	cfg := *base
	kafka.SaramaDefaults(&cfg)
	cfg.Net.DialTimeout = min(cfg.Net.DialTimeout, produceTimeout)
	cfg.Net.ReadTimeout = min(cfg.Net.ReadTimeout, produceTimeout)
	cfg.Net.WriteTimeout = min(cfg.Net.WriteTimeout, produceTimeout)
	cfg.Metadata.Timeout = min(cfg.Metadata.Timeout, produceTimeout)
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Flush.Messages = 500
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	ap, err := sarama.NewAsyncProducer(brokers, &cfg)
	if err != nil {
		return 0, fmt.Errorf("producer: cannot connect to %s: %w", strings.Join(brokers, ","), err)
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
	sent := 0
send:
	for ; sent < n; sent++ {
		s := fmt.Sprintf("sensor-%d", sent%7)
		v := fmt.Sprintf("%s,%.1f", s, 15+float64(sent%100)/10)
		if sent%500 == 499 {
			v = s + ",n/a"
		}
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(s), Value: sarama.StringEncoder(v),
			Headers: []sarama.RecordHeader{{Key: []byte("unit"), Value: []byte("celsius")}}}
		select {
		case ap.Input() <- m:
		case <-ctx.Done():
			break send
		}
	}
	ap.AsyncClose()
	wg.Wait()
	if len(errs) > 0 {
		return sent, fmt.Errorf("produce: %d errors, first: %w", len(errs), errs[0])
	}
	return sent, nil
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
