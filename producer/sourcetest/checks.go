package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
)

// errChosen is the failure of the messages the suite's handler fails.
var errChosen = errors.New("sourcetest: chosen to fail")

// chosen reports whether the handler fails the message with this key: about
// one in four, the same ones every time.
func chosen(key string) bool {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()%4 == 1
}

// checkWindow: no feed ever has more than Flow.MaxWindow() messages fetched
// but not dispatched. A rate limit holds the stage's dispatcher after a few
// messages, so what the source delivers stays in the stage buffer: exactly
// one window per feed, with what was dispatched, however long it is given.
func checkWindow[T any](t testing.TB, h Harness[T]) {
	e, src := setup(t, h, true)
	bound := e.feeds * flow.MaxWindow()
	var peak atomic.Int64
	sample := func() int {
		b := src.buffered()
		for cur := peak.Load(); int64(b) > cur && !peak.CompareAndSwap(cur, int64(b)); cur = peak.Load() {
		}
		return b
	}

	l := newLedger()
	p := e.start("sourcetest-window", src, l, holding, nil)
	// Sample the stage buffer for as long as the pipeline runs (from
	// after pipeline.New, which reads the source's fields).
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(done); wg.Wait() }()
	e.fill(src, l)
	// Give an over-eager source every chance to deliver more: with the
	// dispatched messages, what waits in the buffer must stay at one
	// window per feed.
	want := e.feeds * flow.Initial
	for range 500 {
		calls, _ := l.counts()
		if b := sample(); calls+b > want {
			t.Fatalf("%d messages dispatched and %d in the stage buffer with %d feeds of window %d: more than %d",
				calls, b, e.feeds, flow.Initial, want)
		}
		runtime.Gosched()
	}
	release(t, p)
	wait.Within(t, waitLimit, "every message handled", func() bool { return l.covers(e.keys) })
	if err := stop(p); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if b := int(peak.Load()); b > bound {
		t.Fatalf("the stage buffer held up to %d messages, more than %d feeds × window %d", b, e.feeds, flow.MaxWindow())
	}
}

// readAheadWatch is how long the read-ahead subtest watches the broker once
// every feed has delivered its window: a client that refills a queue of its
// own does so within a few round trips of the source taking from it.
const readAheadWatch = 250 * time.Millisecond

// checkReadAhead: the broker never hands the consumers more than
// Flow.MaxWindow() messages per feed beyond those that left the stage, so
// that nothing fetches ahead of the window (a client's own receive queue,
// a channel between the client and the source).
func checkReadAhead[T any](t testing.TB, h Harness[T]) {
	e, src := setup(t, h, true)
	if e.fx.Fetched == nil {
		t.Skip("the harness cannot count what the broker hands out (Fixture.Fetched is nil)")
	}
	p, l := e.startHeld("sourcetest-read-ahead", src)
	bound := e.feeds * flow.MaxWindow()
	// This watches for something that must not happen, so it watches for
	// a while rather than waiting for a condition.
	peak := 0
	for end := time.Now().Add(readAheadWatch); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		fetched := e.fetched()
		calls, _ := l.counts()
		peak = max(peak, fetched-calls)
		if fetched-calls > bound {
			t.Fatalf("the broker handed out %d messages while %d left the stage: %d ahead, more than %d feeds × window %d",
				fetched, calls, fetched-calls, e.feeds, flow.MaxWindow())
		}
	}
	t.Logf("read-ahead at the broker peaked at %d messages (bound %d)", peak, bound)
	release(t, p)
	wait.Within(t, waitLimit, "every message handled", func() bool { return l.covers(e.keys) })
	if err := stop(p); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// checkOneOutcome: every message is handled once and the broker counts
// exactly one settlement for each, the failed ones included.
func checkOneOutcome[T any](t testing.TB, h Harness[T]) {
	e, src := setup(t, h, false)
	var failed atomic.Int64
	l := newLedger()
	p := e.start("sourcetest-outcome", src, l, nil, func(_ context.Context, m *message.Message[T]) error {
		if chosen(e.fx.Key(m)) {
			failed.Add(1)
			m.SetDisposition(acker.DispositionDiscard)
			return errChosen
		}
		return nil
	})
	wait.Within(t, waitLimit, "every message handled", func() bool { return l.covers(e.keys) })
	if err := stop(p); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if failed.Load() == 0 {
		t.Fatal("the handler failed no message; the subtest proves nothing about failures")
	}
	for k, c := range l.snapshot() {
		if c != 1 {
			t.Errorf("message %q handled %d times in a run without failures", k, c)
		}
	}
	if u := l.unknown(e.keys); len(u) > 0 {
		t.Errorf("handled messages that were not published: %q", u)
	}
	if got := e.waitSettled(len(e.keys)); got != len(e.keys) {
		t.Errorf("the broker counts %d settlements for %d messages each handled once", got, len(e.keys))
	}
}

// checkCloseAfterRun: the pipeline closes the source once, after every Run
// returned, and the messages the handlers finish after Run returned are
// acknowledged at the broker.
func checkCloseAfterRun[T any](t testing.TB, h Harness[T]) {
	e, src, l := drain(t, h)
	active, runs, closes := src.state()
	if runs == 0 || active != 0 {
		t.Fatalf("after Stop: %d Run calls, %d still running", runs, active)
	}
	src.mu.Lock()
	closeAt, lastRunAt, activeAtClose := src.closeAt, src.lastRunAt, src.activeAtClose
	src.mu.Unlock()
	if closes != 1 {
		t.Fatalf("Close called %d times, want once", closes)
	}
	if activeAtClose != 0 || closeAt.Before(lastRunAt) {
		t.Fatalf("Close called while %d Run calls were in progress", activeAtClose)
	}
	handled := len(l.snapshot())
	if got := e.waitSettled(handled); got != handled {
		t.Errorf("the broker counts %d settlements for the %d messages handled before Stop returned", got, handled)
	}
}

// checkDrain: Stop hands every delivered message to the handlers and every
// outcome to the broker before Close; a new source on the same stream
// delivers none of them again, and the rest.
func checkDrain[T any](t testing.TB, h Harness[T]) {
	e, _, first := drain(t, h)
	handled := first.snapshot()
	if got := e.waitSettled(len(handled)); got != len(handled) {
		t.Fatalf("the broker counts %d settlements for the %d messages handled before Stop returned", got, len(handled))
	}
	second := newLedger()
	p := e.start("sourcetest-resume", e.source(), second, nil, nil)
	wait.Within(t, waitLimit, "the rest of the messages handled by a new source", func() bool {
		for _, k := range e.keys {
			if handled[k] == 0 && !second.covers([]string{k}) {
				return false
			}
		}
		return true
	})
	if err := stop(p); err != nil {
		t.Fatalf("stop: %v", err)
	}
	again := 0
	for k := range second.snapshot() {
		if handled[k] > 0 {
			again++
		}
	}
	if again > 0 {
		t.Errorf("%d messages handled and settled before the first Stop were delivered again", again)
	}
	if got := e.waitSettled(len(e.keys)); got != len(e.keys) {
		t.Errorf("the broker counts %d settlements for %d messages", got, len(e.keys))
	}
}

// drain runs a pipeline held by its rate limit until every feed has filled
// its window, stops it, waits until the source's Run has returned, then
// lifts the limit: the buffered messages are handled, and acknowledged,
// during the drain. It returns the first source and what its pipeline
// handled.
func drain[T any](t testing.TB, h Harness[T]) (*env[T], *observed[T], *ledger) {
	t.Helper()
	e, src := setup(t, h, true)
	p, l := e.startHeld("sourcetest-drain", src)
	stopped := make(chan error, 1)
	go func() { stopped <- stop(p) }()
	wait.Within(t, waitLimit, "the source's Run to return after Stop", func() bool {
		active, _, _ := src.state()
		return active == 0
	})
	if _, _, closes := src.state(); closes != 0 {
		t.Fatal("the source was closed before the drain finished")
	}
	release(t, p)
	var err error
	select {
	case err = <-stopped:
	case <-time.After(waitLimit):
		t.Fatalf("Stop did not return within %s", waitLimit)
	}
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	calls, distinct := l.counts()
	if calls != distinct {
		t.Errorf("%d handler calls for %d messages in a run without failures", calls, distinct)
	}
	if want := e.feeds * flow.Initial; distinct != want {
		t.Errorf("the pipeline handled %d messages; %d (%d feeds × Initial %d) were handled or waited in the stage buffer when Stop began",
			distinct, want, e.feeds, flow.Initial)
	}
	return e, src, l
}

// checkRestart: a run that fails is restarted; the source delivers every
// message, and the broker settles each delivery at most once.
func checkRestart[T any](t testing.TB, h Harness[T]) {
	e, src := setup(t, h, true)
	if e.fx.Fail == nil {
		t.Skip("the harness cannot make the source's Run fail (Fixture.Fail is nil)")
	}
	p, l := e.startHeld("sourcetest-restart", src)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.fx.Fail(ctx); err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("the harness cannot make the source's Run fail: %v", err)
		}
		t.Fatalf("inject a failure: %v", err)
	}
	// The stage restarts the source once the failed run's messages have
	// left its buffer: they are handled, and acknowledged, after that run
	// returned.
	release(t, p)
	wait.Within(t, waitLimit, "the stage to restart the source", func() bool {
		st := p.SourceStatus()
		_, runs, _ := src.state()
		return len(st) > 0 && st[0].Restarts >= 1 && connected(st[0]) && runs >= 2
	})
	wait.Within(t, waitLimit, "every message handled after the restart", func() bool { return l.covers(e.keys) })
	if err := stop(p); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("the pipeline failed: %v", err)
	}
	settledAtMostOnce(t, e, l)
}

// interruptAfter is the ShutdownTimeout of the pipeline whose drain the
// interruption subtest cuts short. The source's Close gets as much again.
const interruptAfter = time.Second

// checkInterrupted: a message whose handling the pipeline's shutdown cut
// short (its outcome is acker.Interrupted, with DispositionRetry) is not
// settled at the broker, and a new source on the same stream delivers it
// again. The handlers hold their messages until their context ends, so
// that no message is handled: the broker must settle none.
func checkInterrupted[T any](t testing.TB, h Harness[T]) {
	e, src := setup(t, h, false)
	held := newLedger()
	e.shutdown = interruptAfter
	p := e.start("sourcetest-interrupted", src, newLedger(), nil, func(ctx context.Context, m *message.Message[T]) error {
		held.add(e.fx.Key(m))
		<-ctx.Done()
		return ctx.Err()
	})
	e.shutdown = waitLimit
	// An ordered source may route every message to one processor.
	wait.Within(t, waitLimit, "a handler to hold a message", func() bool {
		calls, _ := held.counts()
		return calls > 0
	})
	err := stop(p)
	var straggler *pipeline.ShutdownTimeoutError
	if !errors.Is(err, pipeline.ErrShutdownTimeout) || errors.As(err, &straggler) {
		t.Fatalf("stop: %v; want the drain cut short by the shutdown timeout, with nothing left running", err)
	}
	if err := p.Err(); err != nil && !errors.Is(err, pipeline.ErrShutdownTimeout) {
		t.Fatalf("the pipeline failed: %v", err)
	}
	if n := e.settled(); n != 0 {
		t.Errorf("the broker counts %d settlements though no message was handled: the source settled messages the shutdown interrupted (acker.Interrupted)", n)
	}
	interrupted := held.snapshot()
	again := newLedger()
	p = e.start("sourcetest-after-interruption", e.source(), again, nil, nil)
	wait.Within(t, waitLimit, fmt.Sprintf("the %d interrupted messages delivered again by a new source", len(interrupted)), func() bool {
		return again.covers(slices.Collect(maps.Keys(interrupted)))
	}, func() string {
		var missing []string
		for k := range interrupted {
			if !again.covers([]string{k}) {
				missing = append(missing, k)
			}
		}
		return fmt.Sprintf("not delivered again: %q", missing)
	})
	if err := stop(p); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// checkOutage: a source whose broker is out of reach says so: its stage
// is degraded, with the cause as its LastError, not running while it reads
// nothing; once the broker is back the stage runs again and the source
// delivers everything until the broker has settled every message (again,
// for one whose settlement the outage lost), settling no delivery twice.
// The pipeline starts held, so that the source has delivered its window
// and waits for permits when the outage begins; lifting the limit sends
// it back to its broker.
func checkOutage[T any](t testing.TB, h Harness[T]) {
	e, src := setup(t, h, true)
	if e.fx.Outage == nil {
		t.Skip("the harness cannot make its broker unreachable (Fixture.Outage is nil)")
	}
	p, l := e.startHeld("sourcetest-outage", src)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	restore, err := e.fx.Outage(ctx)
	if err != nil {
		t.Fatalf("make the broker unreachable: %v", err)
	}
	restored := false
	defer func() {
		if !restored {
			_ = restore(ctx)
		}
	}()
	release(t, p)
	status := func() string { return fmt.Sprintf("stage %+v; %s", p.SourceStatus()[0], heldState(src, l)) }
	wait.Within(t, waitLimit, "the stage to be degraded while its broker is out of reach (the source calls RunHealth.Degrade)", func() bool {
		return p.SourceStatus()[0].State == producer.StateDegraded
	}, status)
	if st := p.SourceStatus()[0]; st.LastError == nil {
		t.Errorf("the degraded stage has no LastError: %+v", st)
	}
	restored = true
	if err := restore(ctx); err != nil {
		t.Fatalf("make the broker reachable again: %v", err)
	}
	wait.Within(t, waitLimit, "the stage to run again once its broker is back (the source calls RunHealth.Recovered)", func() bool {
		return connected(p.SourceStatus()[0])
	}, status)
	// A message handled during the outage may have lost its settlement
	// with the connection (a Kafka member whose partitions were revoked
	// drops the offsets it could not commit); the source delivers it again
	// once it is back, so the pipeline runs until the broker has settled
	// every message, not only until each was handled once.
	wait.Within(t, waitLimit, "every message handled and settled after the outage", func() bool {
		return l.covers(e.keys) && e.settled() >= len(e.keys)
	}, func() string {
		return fmt.Sprintf("%s; the broker settled %d of %d", status(), e.settled(), len(e.keys))
	})
	if err := stop(p); err != nil {
		t.Fatalf("stop: %v", err)
	}
	settledAtMostOnce(t, e, l)
}

// connected reports whether the stage's current run has connected (created
// a feed), or ended after it ran, as a generator does once exhausted.
func connected(st producer.StageStatus) bool {
	return st.State == producer.StateRunning || st.State == producer.StateStopped
}

// settledAtMostOnce checks that the broker settled every message, and no
// more often than the handlers saw it: one settlement per delivery at most.
func settledAtMostOnce[T any](t testing.TB, e *env[T], l *ledger) {
	t.Helper()
	calls, distinct := l.counts()
	if distinct != len(e.keys) {
		t.Fatalf("%d of %d messages handled", distinct, len(e.keys))
	}
	if u := l.unknown(e.keys); len(u) > 0 {
		t.Errorf("handled messages that were not published: %q", u)
	}
	got := e.waitSettled(len(e.keys))
	if got > calls {
		t.Errorf("the broker counts %d settlements for %d deliveries of %d messages", got, calls, len(e.keys))
	}
	if calls > distinct {
		t.Logf("%d messages delivered again after the failure (at least once)", calls-distinct)
	}
}

// checkMemberJoin: a second consumer joins while the first one's stage
// buffer holds a window per feed. Messages the first one
// withdraws go to the second; nothing is lost, no delivery is settled
// twice, and both pipelines stop cleanly.
func checkMemberJoin[T any](t testing.TB, h Harness[T]) {
	e, src := setup(t, h, true)
	p1, l := e.startHeld("sourcetest-member-1", src)
	p2 := e.start("sourcetest-member-2", e.source(), l, nil, nil)
	wait.Within(t, waitLimit, "the second consumer to connect", func() bool {
		st := p2.SourceStatus()
		return len(st) > 0 && connected(st[0])
	})
	release(t, p1)
	wait.Within(t, waitLimit, "every message handled by one of the consumers", func() bool { return l.covers(e.keys) })
	var errs []error
	for _, p := range []interface{ Stop(context.Context) error }{p1, p2} {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		if err := p.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("stop: %v", err)
	}
	settledAtMostOnce(t, e, l)
}
