package source_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// rcrowley/go-metrics (sarama's metric registry, in the tests on a
		// Kafka topic) starts one process-wide meter ticker on first use
		// and never stops it.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

const deadline = 15 * time.Second

// listSource is the upstream test source: it delivers the values 0..n-1
// (each with its value as ack id) under its feed's permits, then waits
// until the pipeline stops it.
type listSource struct {
	producer.Basic
	n   int
	ack acker.Acknowledger
}

func (s *listSource) Run(ctx context.Context, st *producer.Stage[int]) error {
	feed := st.NewFeed("list", nil)
	for i := 0; i < s.n; {
		k, err := feed.Acquire(ctx, s.n-i)
		if err != nil {
			return nil
		}
		for range k {
			feed.Deliver(message.New(i, s.ack, uint64(i)))
			i++
		}
	}
	<-ctx.Done()
	return nil
}

// gate holds handlers until opened.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run builds and starts a pipeline and stops it (draining) at cleanup. The
// cleanups run in reverse order, so start downstream pipelines first: the
// upstream ones are then stopped first.
func run[In, Out any](t *testing.T, opts pipeline.Options[In, Out]) *pipeline.Pipeline[In, Out] {
	t.Helper()
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	p, err := pipeline.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, p) })
	return p
}

func stop[In, Out any](t *testing.T, p *pipeline.Pipeline[In, Out]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Errorf("stopping pipeline: %v", err)
	}
}

// counter records how often each value was handled, and by which member.
type counter struct {
	mu      sync.Mutex
	seen    map[int]int
	members map[int]int
	total   int
}

func newCounter() *counter { return &counter{seen: map[int]int{}, members: map[int]int{}} }

func (c *counter) add(v, member int) {
	c.mu.Lock()
	c.seen[v]++
	c.members[member]++
	c.total++
	c.mu.Unlock()
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

func (c *counter) snapshot() (seen, members map[int]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen, members = map[int]int{}, map[int]int{}
	for k, v := range c.seen {
		seen[k] = v
	}
	for k, v := range c.members {
		members[k] = v
	}
	return seen, members
}

// yield lets other goroutines interleave.
func yield() { runtime.Gosched() }
