package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

const waitLimit = 20 * time.Second

// env is one in-process broker and one client on it, torn down with the test.
type env struct {
	t      *testing.T
	broker *pulsartest.Broker
	client pulsar.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, pulsartest.Options{})
}

// newEnvWith is newEnv on a broker started with opts.
func newEnvWith(t *testing.T, opts pulsartest.Options) *env {
	t.Helper()
	b, err := pulsartest.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := newClient(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &env{t: t, broker: b, client: c}
}

// newClient is the client every test uses.
func newClient(url string) (pulsar.Client, error) {
	return pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 5 * time.Second, Logger: quietLogger()})
}

// testLogger is the pipeline's and source's logger: silent unless
// PULSAR_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("PULSAR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// publish stores n unbatched messages "<prefix>-<i>" on topic.
func (e *env) publish(topic, prefix string, n int) []string {
	e.t.Helper()
	msgs := make([]pulsartest.Message, n)
	want := make([]string, n)
	for i := range msgs {
		want[i] = fmt.Sprintf("%s-%d", prefix, i)
		msgs[i] = pulsartest.Message{Payload: []byte(want[i])}
	}
	if _, err := e.broker.Publish(context.Background(), topic, msgs...); err != nil {
		e.t.Fatal(err)
	}
	return want
}

// received records what the handler saw.
type received struct {
	mu    sync.Mutex
	count map[string]int
	meta  []bpulsar.Metadata
	total int
}

func newReceived() *received { return &received{count: make(map[string]int)} }

func (r *received) add(m *message.Message[[]byte]) {
	md, _ := message.MetadataAs[*bpulsar.Metadata](m)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[string(m.Data)]++
	r.total++
	if md != nil {
		r.meta = append(r.meta, *md)
	}
}

func (r *received) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.count)
}

func (r *received) snapshot() (map[string]int, []bpulsar.Metadata) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := make(map[string]int, len(r.count))
	for k, v := range r.count {
		c[k] = v
	}
	return c, append([]bpulsar.Metadata(nil), r.meta...)
}

// run starts a pipeline over src with handle and stops it at the end of the
// test (or when the test calls the returned stop).
func run(t *testing.T, src *bpulsar.Source, concurrency int, flow producer.Flow, handle processor.Handler[[]byte, []byte]) (p *pipeline.Pipeline[[]byte, []byte], stop func() error) {
	t.Helper()
	return start(t, pipeline.Options[[]byte, []byte]{
		Name:            "pulsar-test",
		Logger:          testLogger(),
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src, Concurrency: concurrency, Flow: flow},
		Processors:      processor.Options[[]byte, []byte]{Concurrency: 2, Handle: handle},
	})
}

// start builds and starts a pipeline from opts and stops it at the end of
// the test, after the test's own deferred calls (or when the test calls the
// returned stop).
func start(t *testing.T, opts pipeline.Options[[]byte, []byte]) (p *pipeline.Pipeline[[]byte, []byte], stop func() error) {
	t.Helper()
	p, err := pipeline.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stopErr = p.Stop(ctx)
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return p, stop
}

// recordAll is a handler that records every message and succeeds.
func recordAll(r *received) processor.Handler[[]byte, []byte] {
	return func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		r.add(m)
		return m.Data, nil
	}
}

// earliest is the consumer option every test uses so that messages
// published before the subscription are delivered.
func earliest() pulsar.ConsumerOptions {
	return pulsar.ConsumerOptions{SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest}
}

// sumAcked adds up what the broker counted as acked over every consumer of
// subscription on topic (and its partitions, when parts > 0).
func (e *env) sumAcked(topic, sub string, parts int) int64 {
	var n int64
	for _, c := range e.consumerStats(topic, sub, parts) {
		n += c.Acked
	}
	return n
}

// connectedCount is the number of consumers of subscription on topic (and
// its partitions, when parts > 0) the broker lists as connected.
func (e *env) connectedCount(topic, sub string, parts int) int {
	n := 0
	for _, c := range e.consumerStats(topic, sub, parts) {
		if c.Connected {
			n++
		}
	}
	return n
}

func (e *env) consumerStats(topic, sub string, parts int) []pulsartest.ConsumerStats {
	if parts == 0 {
		return e.broker.Consumers(topic, sub)
	}
	var out []pulsartest.ConsumerStats
	for i := range parts {
		out = append(out, e.broker.Consumers(pulsartest.PartitionTopic(topic, i), sub)...)
	}
	return out
}

// gate holds handlers until it is opened; opening it again does nothing.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

// open lets every handler held at the gate go on.
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// recordAfter is a handler that waits for g to open, then records the
// message and succeeds.
func recordAfter(g *gate, r *received) processor.Handler[[]byte, []byte] {
	return func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		<-g.ch
		r.add(m)
		return m.Data, nil
	}
}

// stopLeavingNoProducerStage stops p with testbroker.HungDeadline and
// fails t unless Stop returns by then (plus testbroker.HungGrace) with no
// producer stage left running, when (a phrase such as "during a reconnect
// storm") saying what held the broker. It returns Stop's error.
func stopLeavingNoProducerStage[In, Out any](t *testing.T, p *pipeline.Pipeline[In, Out], when string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.HungDeadline)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Stop(ctx) }()
	select {
	case err := <-stopped:
		t.Logf("Stop: %v", err)
		var te *pipeline.ShutdownTimeoutError
		if errors.As(err, &te) {
			for _, s := range te.Running {
				if s.Kind == pipeline.KindProducerStage {
					t.Errorf("Stop %s left %v running: %v", when, s, err)
				}
			}
		}
		return err
	case <-time.After(testbroker.HungDeadline + testbroker.HungGrace):
		t.Fatalf("Stop %s still runs %v after its %v deadline", when, testbroker.HungGrace, testbroker.HungDeadline)
		return nil
	}
}

// runUntilGivenUp runs a pipeline named name on src, passing messages
// through, until its producer stage has restarted maxRestarts times
// within a minute and given up (or waitLimit passes), and returns Run's
// error.
func runUntilGivenUp(t *testing.T, name string, src *bpulsar.Source, maxRestarts int, logger *slog.Logger) error {
	t.Helper()
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:       name,
		Logger:     logger,
		Producer:   producer.Options[[]byte]{Source: src, Restart: producer.Restart{MaxRestarts: maxRestarts, Window: time.Minute, Backoff: 10 * time.Millisecond}},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return p.Run(ctx)
}
