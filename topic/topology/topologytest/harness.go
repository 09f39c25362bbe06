package topologytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// CloseWithin bounds MustClose: a Close on a broker that answers returns
// well within it.
const CloseWithin = 30 * time.Second

// MustClose calls closeFn (a backend's or a reader's Close) with a context
// of CloseWithin, and fails t unless it returns nil. Backend tests use it
// in their cleanups.
func MustClose(t testing.TB, what string, closeFn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CloseWithin)
	defer cancel()
	if err := closeFn(ctx); err != nil {
		t.Errorf("closing %s: %v", what, err)
	}
}

// h is one subtest's harness.
type h struct {
	*testing.T
	cfg  Config
	be   topology.Backend[Msg]
	ctx  context.Context
	logs *logtest.Records
	// producers is the producer concurrency of the next consume (0: 1).
	producers int
	// shutdown is the ShutdownTimeout of the next consume (0: the
	// pipeline's default).
	shutdown time.Duration
	// unlogged makes the next consume record attempts without their
	// payloads, for a subtest that checks what stays reachable.
	unlogged bool
}

func newHarness(t *testing.T, cfg Config) *h {
	s := &h{T: t, cfg: cfg, ctx: t.Context(), logs: &logtest.Records{}}
	s.be = cfg.NewBackend(t)
	return s
}

// declare builds and declares a topology.
func (s *h) declare(b *topology.Builder) topology.Queues[Msg] {
	s.Helper()
	top, err := b.Build()
	if err != nil {
		s.Fatalf("Build: %v", err)
	}
	q, err := s.be.Declare(s.ctx, top)
	if err != nil {
		s.Fatalf("Declare %s: %v", top, err)
	}
	return q
}

// publish publishes msgs in order.
func (s *h) publish(q topology.Queues[Msg], msgs ...Msg) {
	s.Helper()
	opts := topology.PublisherOptions[Msg]{}
	if _, seq := q.Topology().Sequenced(); seq {
		opts.Key = func(m Msg) string { return m.Key }
	}
	p, err := topology.NewPublisher(q, opts)
	if err != nil {
		s.Fatalf("NewPublisher: %v", err)
	}
	for _, m := range msgs {
		if err := p.Publish(s.ctx, m); err != nil {
			s.Fatalf("Publish %v: %v", m, err)
		}
	}
}

// attempt is one call of a consumer's handler.
type attempt struct {
	Msg
	Retries int
	At      time.Time
	Death   *topology.Death
	Headers topic.Headers
}

// consumer is a running pipeline over a topology source that records
// every handler call.
type consumer struct {
	src *topology.Source[Msg]
	p   *pipeline.Pipeline[Msg, Msg]
	// cut is set when its stop is meant to be cut short by the shutdown
	// timeout (Stop then reports pipeline.ErrShutdownTimeout).
	cut atomic.Bool
	// crashed is set when its backend is closed under it, as a crash of
	// the process does (Config.Restart): its source then fails with
	// topology.ErrClosed, which Stop reports.
	crashed atomic.Bool
	mu      sync.Mutex
	log     []attempt
}

func (c *consumer) attempts() []attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// of returns the attempts at messages of key.
func (c *consumer) of(key string) []attempt {
	var out []attempt
	for _, a := range c.attempts() {
		if a.Key == key {
			out = append(out, a)
		}
	}
	return out
}

// handler decides a message's fate from its payload and delivery.
type handler func(ctx context.Context, m Msg, d *topology.Delivery) error

// consume starts a pipeline over q (over its DLQ when dead) and stops it
// when the subtest ends.
func (s *h) consume(q topology.Queues[Msg], dead bool, opts topology.SourceOptions[Msg], handle handler, failed func(context.Context, []*message.Message[Msg])) *consumer {
	s.Helper()
	opts.Queues = q
	opts.Logger = slog.New(s.logs)
	var src *topology.Source[Msg]
	var err error
	if dead {
		src, err = topology.NewDeadSource(opts)
	} else {
		src, err = topology.NewSource(opts)
	}
	if err != nil {
		s.Fatalf("NewSource: %v", err)
	}
	c := &consumer{src: src}
	unlogged := s.unlogged
	p, err := pipeline.New(pipeline.Options[Msg, Msg]{
		Name:            "topologytest",
		Logger:          slog.New(slog.DiscardHandler),
		ShutdownTimeout: s.shutdown,
		Producer:        producer.Options[Msg]{Source: src, Concurrency: s.producers},
		Processors: processor.Options[Msg, Msg]{
			Concurrency: 2,
			Handle: func(ctx context.Context, m *message.Message[Msg]) (Msg, error) {
				d, _ := topology.DeliveryOf(m)
				c.mu.Lock()
				a := attempt{Msg: m.Data, Retries: d.Retries, At: time.Now(), Death: d.Death, Headers: d.Headers}
				if unlogged {
					a.Msg = Msg{}
				}
				c.log = append(c.log, a)
				c.mu.Unlock()
				return m.Data, handle(ctx, m.Data, d)
			},
			HandleFailed: failed,
		},
	})
	if err != nil {
		s.Fatalf("pipeline.New: %v", err)
	}
	if err := p.Start(s.ctx); err != nil {
		s.Fatalf("Start: %v", err)
	}
	c.p = p
	s.Cleanup(func() { s.stop(c) })
	return c
}

// stop drains and stops c's pipeline (again: a no-op).
func (s *h) stop(c *consumer) {
	s.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 30*time.Second)
	defer cancel()
	if err := c.p.Stop(ctx); err != nil && !(c.cut.Load() && errors.Is(err, pipeline.ErrShutdownTimeout)) &&
		!(c.crashed.Load() && errors.Is(err, topology.ErrClosed)) {
		s.Errorf("Stop: %v", err)
	}
}

// closes calls closeFn (a Close) with ctx and waits, within bound of
// (fake or real) time, for it to return; it returns closeFn's error.
func (s *h) closes(ctx context.Context, what string, closeFn func(context.Context) error, bound time.Duration) error {
	s.Helper()
	ret := make(chan error, 1)
	go func() { ret <- closeFn(ctx) }()
	var err error
	s.eventually("closing "+what+" to return", bound, func() bool {
		select {
		case err = <-ret:
			return true
		default:
			return false
		}
	})
	return err
}

// eventually waits until cond holds: in a synctest bubble by letting fake
// time pass, otherwise by polling, within bound of (fake or real) time.
func (s *h) eventually(what string, bound time.Duration, cond func() bool) {
	s.Helper()
	deadline := time.Now().Add(bound)
	for {
		if s.cfg.Synctest {
			synctest.Wait()
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			s.Fatalf("still waiting after %s for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval (fake time in a bubble)
	}
}

// settle lets everything that is ready happen: in a bubble it waits until
// every goroutine is blocked; otherwise it polls cond.
func (s *h) quiet() {
	if s.cfg.Synctest {
		synctest.Wait()
	}
}

// dead drains the DLQ of q through Replay's dry run and returns the
// letters q's topic and consumer group dead-lettered (every letter stays
// in the DLQ).
func (s *h) dead(q topology.Queues[Msg]) []topology.Letter[Msg] {
	s.Helper()
	rep, err := topology.Replay(s.ctx, q, topology.ReplayOptions[Msg]{DryRun: true})
	if err != nil {
		s.Fatalf("Replay dry run: %v", err)
	}
	return rep.Replayed
}

// deadNs returns the numbers of the letters dead returns, in increasing
// order, as fmt.Sprint writes them: "[1 2 3]".
func (s *h) deadNs(q topology.Queues[Msg]) string {
	s.Helper()
	var ns []int
	for _, l := range s.dead(q) {
		ns = append(ns, l.Value.N)
	}
	slices.Sort(ns)
	return fmt.Sprint(ns)
}
