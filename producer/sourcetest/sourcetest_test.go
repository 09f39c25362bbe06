package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memBroker is an in-memory queue with at-least-once delivery: a message is
// leased when a source takes it, settled when the source acknowledges it
// (counting every acknowledgement), and offered again when its lease is
// given back (a nack, or the consumer leaving without settling it).
type memBroker struct {
	mu      sync.Mutex
	taken   int // messages leased, counting a redelivery again
	keys    []string
	ready   []int // indexes of the messages to deliver, in order
	settled map[int]int
	total   int
	wake    chan struct{}
	up      chan struct{} // closed when an outage ends; nil while the broker is reachable
}

// errDown is what the broker answers while it is out of reach.
var errDown = errors.New("broker out of reach")

// outage makes the broker unreachable until restore is called.
func (b *memBroker) outage(context.Context) (func(context.Context) error, error) {
	up := make(chan struct{})
	b.mu.Lock()
	b.up = up
	b.mu.Unlock()
	b.signal()
	return func(context.Context) error {
		b.mu.Lock()
		b.up = nil
		b.mu.Unlock()
		close(up)
		return nil
	}, nil
}

// waitUp waits until the broker is reachable.
func (b *memBroker) waitUp(ctx context.Context) error {
	b.mu.Lock()
	up := b.up
	b.mu.Unlock()
	if up == nil {
		return nil
	}
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newMemBroker(n int) *memBroker {
	b := &memBroker{settled: map[int]int{}, wake: make(chan struct{}, 1)}
	for i := range n {
		b.keys = append(b.keys, fmt.Sprintf("m%d", i))
	}
	return b
}

func (b *memBroker) publish(context.Context) ([]string, error) {
	b.mu.Lock()
	for i := range b.keys {
		b.ready = append(b.ready, i)
	}
	b.mu.Unlock()
	b.signal()
	return append([]string(nil), b.keys...), nil
}

func (b *memBroker) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take leases up to k messages, waiting until there is one.
func (b *memBroker) take(ctx context.Context, k int) ([]int, error) {
	for {
		b.mu.Lock()
		if b.up != nil {
			b.mu.Unlock()
			return nil, errDown
		}
		if len(b.ready) > 0 {
			k = min(k, len(b.ready))
			out := append([]int(nil), b.ready[:k]...)
			b.taken += k
			b.ready = b.ready[k:]
			more := len(b.ready) > 0
			b.mu.Unlock()
			if more {
				b.signal()
			}
			return out, nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *memBroker) settle(i int) {
	b.mu.Lock()
	b.settled[i]++
	b.total++
	b.mu.Unlock()
}

func (b *memBroker) giveBack(i int) {
	b.mu.Lock()
	b.ready = append(b.ready, i)
	b.mu.Unlock()
	b.signal()
}

func (b *memBroker) takenCount(context.Context) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.taken, nil
}

func (b *memBroker) settledCount(context.Context) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, nil
}

// memSource is a correct pull-model source on a memBroker. The faults make
// it break one rule each, to prove that the suite notices.
type memSource struct {
	producer.Basic
	b          *memBroker
	faults     faults
	closed     bool
	prefetched []int
}

type faults struct {
	readAhead    bool // lease a window more than acquired, and keep it for the next delivery
	overDeliver  bool // deliver twice what was acquired
	doubleAck    bool // settle every successful message twice
	ackOnlyInRun bool // ignore acknowledgements that arrive after Run returned
	settleFailed bool // settle every failed message, the interrupted ones too
	silentOutage bool // never report that the broker is out of reach
	neverRecover bool // never report that the broker is back
}

type memAck struct {
	s   *memSource
	mu  sync.Mutex
	run bool
}

func (a *memAck) Ack(_ context.Context, successful, failed []acker.Outcome) {
	a.mu.Lock()
	run := a.run
	a.mu.Unlock()
	if a.s.faults.ackOnlyInRun && !run {
		return
	}
	for _, o := range successful {
		a.s.b.settle(int(o.ID))
		if a.s.faults.doubleAck {
			a.s.b.settle(int(o.ID))
		}
	}
	for _, o := range failed {
		if a.s.faults.settleFailed || o.Disposition == acker.DispositionDiscard && !acker.Interrupted(o) {
			a.s.b.settle(int(o.ID))
		} else {
			a.s.b.giveBack(int(o.ID))
		}
	}
}

func (s *memSource) Run(ctx context.Context, st *producer.Stage[string]) error {
	ack := &memAck{s: s, run: true}
	defer func() {
		ack.mu.Lock()
		ack.run = false
		ack.mu.Unlock()
	}()
	health := st.Health()
	feed := st.NewFeed("mem", nil)
	have := 0 // permits acquired and not used by a delivery yet
	for {
		if have == 0 {
			k, err := feed.Acquire(ctx, 16)
			if err != nil {
				return nil
			}
			have = k
		}
		k := have
		if s.faults.overDeliver {
			k *= 2
		}
		idx, err := s.b.take(ctx, k)
		if errors.Is(err, errDown) {
			if !s.faults.silentOutage {
				health.Degrade(err)
			}
			if s.b.waitUp(ctx) != nil {
				return nil
			}
			continue
		}
		if err != nil {
			return nil
		}
		if !s.faults.neverRecover {
			health.Recovered()
		}
		have = max(0, have-len(idx))
		if s.faults.readAhead {
			// Prefetch a window into a queue of the source's own, as a
			// client library with a receive queue does.
			more, err := s.b.take(ctx, st.Flow().MaxWindow())
			if err != nil {
				return nil
			}
			s.prefetched = append(s.prefetched, more...)
			idx, s.prefetched = append(s.prefetched[:0:0], s.prefetched[:min(k, len(s.prefetched))]...), s.prefetched[min(k, len(s.prefetched)):]
		}
		msgs := make([]*message.Message[string], len(idx))
		for j, i := range idx {
			msgs[j] = message.New(s.b.keys[i], acker.Acknowledger(ack), uint64(i))
		}
		feed.Deliver(msgs...)
	}
}

func (s *memSource) Close(context.Context) error {
	s.closed = true
	return nil
}

func memHarness(f faults) Harness[string] {
	return Harness[string]{Start: func(t testing.TB, n int) Fixture[string] {
		b := newMemBroker(n)
		fail := &Failing[string]{}
		return Fixture[string]{
			NewSource: func() (producer.Source[string], error) { return fail.Wrap(&memSource{b: b, faults: f}), nil },
			Publish:   b.publish,
			Key:       func(m *message.Message[string]) string { return m.Data },
			Settled:   b.settledCount,
			Fail:      fail.Fail,
			Fetched:   b.takenCount,
			Outage:    b.outage,
		}
	}}
}

// A correct source passes every subtest.
func TestReferenceSourcePasses(t *testing.T) {
	Run(t, memHarness(faults{}))
}

// fakeT runs one subtest's check in its own goroutine and keeps its
// failures instead of reporting them, so that a test can assert that a
// check fails.
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	skipped  bool
	cleanups []func()
}

func (f *fakeT) fail(msg string) {
	f.mu.Lock()
	f.failures = append(f.failures, msg)
	f.mu.Unlock()
}

func (f *fakeT) Errorf(format string, args ...any) { f.fail(fmt.Sprintf(format, args...)) }
func (f *fakeT) Error(args ...any)                 { f.fail(fmt.Sprint(args...)) }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (f *fakeT) Fatal(args ...any)    { f.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (f *fakeT) FailNow()             { f.fail("FailNow"); runtime.Goexit() }
func (f *fakeT) Skipf(string, ...any) { f.skipped = true; runtime.Goexit() }
func (f *fakeT) Skip(...any)          { f.skipped = true; runtime.Goexit() }
func (f *fakeT) Cleanup(fn func())    { f.cleanups = append(f.cleanups, fn) }

func (f *fakeT) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.failures) > 0
}

// runCheck runs the named check against h and returns its failures.
func runCheck(t *testing.T, name string, h Harness[string]) []string {
	t.Helper()
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(f.cleanups) - 1; i >= 0; i-- {
				f.cleanups[i]()
			}
		}()
		for _, c := range checks[string]() {
			if c.name == name {
				c.run(f, h)
				return
			}
		}
		f.fail("no check " + name)
	}()
	<-done
	return f.failures
}

// Each check fails for a source that breaks the rule it checks.
func TestChecksCatchBrokenSources(t *testing.T) {
	defer func(d time.Duration) { waitLimit = d }(waitLimit)
	waitLimit = 2 * time.Second
	for _, c := range []struct {
		check  string
		faults faults
		want   string
	}{
		// A source that delivers more than its permits fills the stage buffer past the window.
		{"PermitWindow", faults{overDeliver: true}, "permit window"},
		// A source that prefetches a window of its own is ahead of the window at the broker.
		{"ReadAheadAtBroker", faults{readAhead: true}, "ahead"},
		// A source that acknowledges a message twice is counted twice at the broker.
		{"OneOutcomePerMessage", faults{doubleAck: true}, "settlements"},
		// A source whose acknowledger stops with Run loses the outcomes of the drain.
		{"CloseAfterRun", faults{ackOnlyInRun: true}, "settle"},
		// The same source leaves messages handled during the drain unsettled, so they come again.
		{"DrainFlushesEverything", faults{ackOnlyInRun: true}, "settle"},
		// The same source loses the outcomes of the failed run's messages.
		{"RestartKeepsDelivering", faults{ackOnlyInRun: true}, "settle"},
		// A source that settles a message the shutdown interrupted loses it.
		{"InterruptedIsRedelivered", faults{settleFailed: true}, "interrupted"},
		// A source that says nothing of an outage leaves its stage running while it reads nothing.
		{"OutageDegradesStage", faults{silentOutage: true}, "degraded"},
		// A source that never says its broker is back leaves its stage degraded.
		{"OutageDegradesStage", faults{neverRecover: true}, "run again"},
	} {
		t.Run(c.check+"/"+c.want, func(t *testing.T) {
			got := runCheck(t, c.check, memHarness(c.faults))
			t.Logf("failures: %q", got)
			if len(got) == 0 {
				t.Fatalf("%s passed a source with faults %+v", c.check, c.faults)
			}
			if !strings.Contains(strings.Join(got, "\n"), c.want) {
				t.Fatalf("%s failed for another reason than expected (%q): %q", c.check, c.want, got)
			}
		})
	}
}
