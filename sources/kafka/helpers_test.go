package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (used by sarama for its metric registry)
		// starts one process-wide meter ticker on first use and offers no
		// way to stop it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

const testTopic = "events"

// records is the load size: BOULEVARD_KAFKA_RECORDS, or def.
func records(def int) int {
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_KAFKA_RECORDS")); err == nil && v > 0 {
		return v
	}
	return def
}

// loadWait is d, the wait for every record of the default load def, grown
// in proportion to the load BOULEVARD_KAFKA_RECORDS asks for: a larger
// load takes longer to handle.
func loadWait(d time.Duration, def int) time.Duration {
	return d * time.Duration(max(1, (records(def)+def-1)/def))
}

// newCluster starts a kfake cluster of 3 brokers with the test topic.
func newCluster(t testing.TB, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{
		kfake.NumBrokers(3),
		kfake.SeedTopics(partitions, testTopic),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// produce writes n records spread round-robin over the partitions, with key
// "k<i>" and value "v<i>", with a client given opts too, and returns how
// many went to each partition.
func produce(t testing.TB, c *kfake.Cluster, partitions int32, from, n int, opts ...kgo.Opt) map[int32]int64 {
	t.Helper()
	recs := make([]*kgo.Record, 0, n)
	counts := map[int32]int64{}
	for i := from; i < from+n; i++ {
		p := int32(i) % partitions
		counts[p]++
		recs = append(recs, &kgo.Record{Topic: testTopic, Partition: p,
			Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))})
	}
	produceSync(t, c, recs, opts...)
	return counts
}

// produceSync writes recs to the partitions they name, with a client
// given opts too (kgo.DialTLSConfig for a cluster that speaks TLS).
func produceSync(t testing.TB, c *kfake.Cluster, recs []*kgo.Record, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// testConfig is the tests' sarama config for fast group operations on
// kfake, at Kafka 3.0 and with five offset-commit retries (the source
// replaces its auto-commit settings).
func testConfig() *sarama.Config {
	c := testbroker.SaramaConfig()
	c.Version = sarama.V3_0_0_0
	c.Consumer.Offsets.Retry.Max = 5
	return c
}

// sourceOptions are the options most tests share.
func sourceOptions(c *kfake.Cluster, group string) kafka.Options {
	return kafka.Options{
		Brokers:           c.ListenAddrs(),
		GroupID:           group,
		Topics:            []string{testTopic},
		InitialOffset:     kafka.OffsetEarliest,
		CommitInterval:    100 * time.Millisecond,
		RevokeTimeout:     2 * time.Second,
		RedeliveryBackoff: 100 * time.Millisecond,
		Config:            testConfig(),
		Logger:            testLogger(),
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("BOULEVARD_KAFKA_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// rec identifies a record.
type rec struct {
	P   int32
	Off int64
}

// ledger records what the handlers saw, before they return (so before the
// ack), safe for concurrent use.
type ledger struct {
	mu      sync.Mutex
	seen    map[rec]int
	order   map[int32][]int64
	total   int
	changed chan struct{}
}

func newLedger() *ledger {
	return &ledger{seen: map[rec]int{}, order: map[int32][]int64{}, changed: make(chan struct{}, 1)}
}

func (l *ledger) add(md *kafka.Metadata) {
	l.mu.Lock()
	l.seen[rec{md.Partition, md.Offset}]++
	l.order[md.Partition] = append(l.order[md.Partition], md.Offset)
	l.total++
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *ledger) handled(r rec) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[r] > 0
}

// covers reports whether every offset below ends[p] was seen.
func (l *ledger) covers(ends map[int32]int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, end := range ends {
		for o := int64(0); o < end; o++ {
			if l.seen[rec{p, o}] == 0 {
				return false
			}
		}
	}
	return true
}

// handledPrefix returns, for each of the first parts partitions that has
// one, the offset after its longest run of handled records from offset 0:
// what a commit of everything handled would carry.
func (l *ledger) handledPrefix(parts int32) map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32]int64{}
	for p := range parts {
		o := int64(0)
		for l.seen[rec{p, o}] > 0 {
			o++
		}
		if o > 0 {
			out[p] = o
		}
	}
	return out
}

// duplicates counts extra deliveries.
func (l *ledger) duplicates() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := 0
	for _, n := range l.seen {
		d += n - 1
	}
	return d
}

// watchFetches returns what the cluster's Fetch requests asked for so far:
// the highest fetch offset per partition.
func watchFetches(c *kfake.Cluster) func() map[int32]int64 {
	var mu sync.Mutex
	fetched := map[int32]int64{}
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, pp := range tp.Partitions {
				fetched[pp.Partition] = max(fetched[pp.Partition], pp.FetchOffset)
			}
		}
		return nil, nil, false
	})
	return func() map[int32]int64 {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(fetched)
	}
}

// committed returns the group's committed offsets on the test topic.
func committed(c *kfake.Cluster, group string) map[int32]int64 {
	return committedOn(c, group, testTopic)
}

// committedOn returns the group's committed offsets on topic.
func committedOn(c *kfake.Cluster, group, topic string) map[int32]int64 {
	out := map[int32]int64{}
	gi := c.GroupInfo(group)
	if gi == nil {
		return out
	}
	for p, gc := range gi.Commits[topic] {
		out[p] = gc.Offset
	}
	return out
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

// commitWatch fails the test if the group ever commits an offset past a
// record the handlers have not seen. It observes OffsetCommit requests at the
// broker.
type commitWatch struct {
	mu         sync.Mutex
	violations []string
	commits    int
}

func watchCommits(c *kfake.Cluster, group string, l *ledger) *commitWatch {
	a := &commitWatch{}
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.commits++
		for _, tp := range r.Topics {
			for _, pp := range tp.Partitions {
				// Everything below the committed offset must have been
				// handled; checking the last few keeps this cheap.
				for o := max(0, pp.Offset-50); o < pp.Offset; o++ {
					if !l.handled(rec{pp.Partition, o}) {
						a.violations = append(a.violations, fmt.Sprintf("partition %d committed at %d but offset %d not handled", pp.Partition, pp.Offset, o))
						break
					}
				}
			}
		}
		return nil, nil, false
	})
	return a
}

func (a *commitWatch) check(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.violations) > 0 {
		t.Fatalf("%d commits past unhandled records, first: %s", len(a.violations), a.violations[0])
	}
	if a.commits == 0 {
		t.Fatal("the group never committed")
	}
}

// pipelineOpts builds a pipeline around src whose handler records every
// message in l and then calls extra (which may fail it).
func pipelineOpts(name string, src producer.Source[[]byte], members int, l *ledger, extra func(m *message.Message[[]byte]) error) pipeline.Options[[]byte, []byte] {
	return pipeline.Options[[]byte, []byte]{
		Name:            name,
		ShutdownTimeout: 10 * time.Second,
		Producer: producer.Options[[]byte]{
			Source:      src,
			Concurrency: members,
			Flow:        producer.Flow{Initial: 50},
		},
		Processors: processor.Options[[]byte, []byte]{
			Concurrency: 4,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				md, ok := message.MetadataAs[*kafka.Metadata](m)
				if !ok {
					return nil, fmt.Errorf("no kafka metadata")
				}
				if extra != nil {
					if err := extra(m); err != nil {
						return nil, err
					}
				}
				l.add(md)
				return m.Data, nil
			},
		},
	}
}

// startStalled starts a pipeline of one member over src, with a permit
// window of window and one processor of demand 1 whose handler blocks
// until resume is called (more calls do nothing). The caller resumes the
// handler, then stops the pipeline.
func startStalled(t testing.TB, name string, src testSource, l *ledger, window int) (p *pipeline.Pipeline[[]byte, []byte], resume func()) {
	t.Helper()
	release := make(chan struct{})
	po := pipelineOpts(name, src, 1, l, func(*message.Message[[]byte]) error {
		<-release
		return nil
	})
	po.Producer.Flow = producer.Flow{Initial: window}
	po.Processors.Concurrency = 1
	po.Processors.MaxDemand = 1
	return startPipeline(t, po), sync.OnceFunc(func() { close(release) })
}

// startPipeline creates and starts a pipeline; the caller stops it.
// disposeAll is a failure hook that gives every failed message disposition d.
func disposeAll(d acker.Disposition) func(context.Context, []*message.Message[[]byte]) {
	return func(_ context.Context, failed []*message.Message[[]byte]) {
		for _, m := range failed {
			m.SetDisposition(d)
		}
	}
}

func startPipeline(t testing.TB, opts pipeline.Options[[]byte, []byte]) *pipeline.Pipeline[[]byte, []byte] {
	t.Helper()
	p, err := pipeline.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func stopPipeline(t testing.TB, p *pipeline.Pipeline[[]byte, []byte]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func newSource(t testing.TB, opts kafka.Options) *kafka.Source {
	t.Helper()
	src, err := kafka.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
