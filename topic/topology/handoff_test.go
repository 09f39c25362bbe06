package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// refusingHolds fails every Hold while r.refuse is set, as a broker that
// refuses the hold topic would, and records in r when each was tried.
type refusingHolds struct {
	topology.Queues[int]
	r *failedHoldRun
}

func (q refusingHolds) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	q.r.attempts.Add(1)
	q.r.mu.Lock()
	q.r.tried = append(q.r.tried, time.Now())
	q.r.mu.Unlock()
	if q.r.refuse.Load() {
		return errors.New("hold topic unavailable")
	}
	return q.Queues.Hold(ctx, i, l)
}

// failedHoldRun is a sequenced topology on the in-memory backend whose
// holds are refused while refuse is set, consumed by a pipeline that
// retries value 1 once and records what it handles in key A, and when
// each hold was tried.
type failedHoldRun struct {
	m  *topology.Memory[int]
	mq topology.Queues[int]
	// counted records what the source's readers received and settled.
	counted  *failingQueues[int]
	src      *topology.Source[int]
	p        *pipeline.Pipeline[int, int]
	refuse   atomic.Bool
	attempts atomic.Int64

	mu      sync.Mutex
	handled []int
	tried   []time.Time
}

// startFailedHoldRun starts a failedHoldRun whose source logs to log.
func startFailedHoldRun(t *testing.T, log *slog.Logger) *failedHoldRun {
	t.Helper()
	r := &failedHoldRun{}
	r.refuse.Store(true)
	r.m, r.mq = declareLedger(t)
	r.counted = &failingQueues[int]{Queues: r.mq}
	q := refusingHolds{Queues: r.counted, r: r}
	r.src, r.p = startLoggingPipeline(t, q, log, func(_ context.Context, m *message.Message[int]) (int, error) {
		r.mu.Lock()
		r.handled = append(r.handled, m.Data)
		first := len(r.handled) == 1
		r.mu.Unlock()
		if first {
			return 0, topology.Retry(errors.New("gateway down"))
		}
		return m.Data, nil
	})
	publishOneTwoToKeyA(t, q)
	return r
}

// publishOneTwoToKeyA publishes 1 then 2 to q, both of key A.
func publishOneTwoToKeyA(t *testing.T, q topology.Queues[int]) {
	t.Helper()
	pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
	for v := 1; v <= 2; v++ {
		if err := pub.Publish(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
}

// build returns the topology b builds, failing t if it cannot.
func build(t *testing.T, b *topology.Builder) *topology.Topology {
	t.Helper()
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// declareMemory declares top on an in-memory backend closed when t ends.
func declareMemory(t *testing.T, top *topology.Topology) (*topology.Memory[int], topology.Queues[int]) {
	t.Helper()
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	return m, q
}

// declareLedger declares the sequenced topology "ledger", with one hold
// queue of a second, on an in-memory backend closed when t ends.
func declareLedger(t *testing.T) (*topology.Memory[int], topology.Queues[int]) {
	t.Helper()
	return declareMemory(t, build(t, topology.New("ledger").Sequenced(topology.Skip).Hold(time.Second)))
}

// startPipeline starts a pipeline, named after q's topology, of one
// processor running handle over a source of q that logs nothing, stopped
// when t ends; adjust, if any, changes the pipeline's options first.
func startPipeline(t *testing.T, q topology.Queues[int], handle processor.Handler[int, int], adjust ...func(*pipeline.Options[int, int])) (*topology.Source[int], *pipeline.Pipeline[int, int]) {
	t.Helper()
	return startLoggingPipeline(t, q, slog.New(slog.DiscardHandler), handle, adjust...)
}

// startLoggingPipeline is startPipeline with a source that logs to log.
func startLoggingPipeline(t *testing.T, q topology.Queues[int], log *slog.Logger, handle processor.Handler[int, int], adjust ...func(*pipeline.Options[int, int])) (*topology.Source[int], *pipeline.Pipeline[int, int]) {
	t.Helper()
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return src, startPipelineOf(t, q.Topology().Name(), src, handle, adjust...)
}

// startPipelineOf starts the pipeline name, stopped when t ends, reading
// src.
func startPipelineOf(t *testing.T, name string, src *topology.Source[int], handle processor.Handler[int, int], adjust ...func(*pipeline.Options[int, int])) *pipeline.Pipeline[int, int] {
	t.Helper()
	opts := pipeline.Options[int, int]{
		Name:       name,
		Logger:     slog.New(slog.DiscardHandler),
		Producer:   producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: handle},
	}
	for _, f := range adjust {
		f(&opts)
	}
	p, err := pipeline.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A test that fails before it stops the pipeline stops it here (a
	// second Stop returns at once), rather than leave its goroutines, and
	// in a bubble a hand-off's timers, running.
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

func (r *failedHoldRun) handledSoFar() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.handled)
}

func (r *failedHoldRun) triedSoFar() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tried)
}

// takeHoldsAndStop lets the backend take the holds, waits out the
// longest backoff and the hold, checks that the retry and the later
// message of its key were handled, in order, and stops the pipeline.
func (r *failedHoldRun) takeHoldsAndStop(t *testing.T) {
	t.Helper()
	r.refuse.Store(false)
	time.Sleep(15 * time.Second) // the longest backoff, then the hold's second
	synctest.Wait()
	if got := r.handledSoFar(); !slices.Equal(got, []int{1, 1, 2}) {
		t.Fatalf("handled %v once the hold was taken, want [1 1 2]", got)
	}
	if err := r.p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: on a sequenced topology, a retry whose hold the backend
// refuses keeps its key's place and moves on once the backend takes it:
// the source tries the hold again with backoff, the retry comes back, and
// the later message of its key follows it.
func TestRefusedHoldIsTriedAgainAndItsKeyMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startFailedHoldRun(t, slog.New(slog.DiscardHandler))
		time.Sleep(3 * time.Second) // the source's backoff is fake time here
		synctest.Wait()
		if n := r.attempts.Load(); n < 3 {
			t.Fatalf("the hold was tried %d times in 3s, want it tried again with backoff", n)
		}
		if got := r.handledSoFar(); !slices.Equal(got, []int{1}) {
			t.Fatalf("handled %v while the hold was refused, want [1] (2 waits behind it)", got)
		}
		r.takeHoldsAndStop(t)
		if st := r.src.Stats(); st.Acked != 2 || st.HeldBack != 0 {
			t.Fatalf("stats %+v, want 2 acked and nothing held back", st)
		}
	})
}

// Guarantee: on a sequenced topology, a retry whose hold the backend
// refused and then took is settled once the backend took it, as any
// letter handed off is: a durable backend commits it, and its reader
// closes with no letter out.
func TestRefusedHoldIsSettledOnceTheBackendTakesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startFailedHoldRun(t, slog.New(slog.DiscardHandler))
		time.Sleep(time.Second)
		synctest.Wait()
		r.takeHoldsAndStop(t)
		if n := r.counted.closedWithLettersOut(); n != 0 {
			t.Errorf("the source's reader closed with %d letters not settled, want none: the retry the backend took at last is settled", n)
		}
	})
}

// Guarantee: on a sequenced topology, a retry whose hold the backend keeps
// refusing is tried again for as long as the source runs, after 100ms,
// then twice as long each time up to 10s, then every 10s. Its first
// failure and each doubling of its failed attempts (the 2nd, 4th, 8th,
// ...) are the failures worth an ERROR line, not every attempt, and
// those lines are kept to one per logburst.Interval: the 2nd and the 4th
// fail within 10s of the first and are counted, not logged, their count
// carried by the 8th's line. One INFO line says the backend took it.
func TestRefusedHoldBacksOffToTenSecondsAndLogsItsDoublingsAnIntervalApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log logtest.Lines
		r := startFailedHoldRun(t, slog.New(slog.NewTextHandler(&log, nil)))
		time.Sleep(10 * time.Minute) // fake time
		synctest.Wait()
		tried := r.triedSoFar()
		if len(tried) < 60 {
			t.Fatalf("the hold was tried %d times in 10 minutes, want it tried every 10s at most", len(tried))
		}
		backsOffToTenSeconds(t, tried)
		r.takeHoldsAndStop(t)
		doublings := bits.Len(uint(len(tried)))
		if lines, told := log.Told(refusedHoldLine); lines != doublings-2 || told != doublings {
			t.Fatalf("%d ERROR lines telling of %d failures for %d failed attempts, want %d telling of %d: the first and each doubling, the 2nd and 4th counted on the 8th's line\n%s",
				lines, told, len(tried), doublings-2, doublings, strings.Join(log.All(), ""))
		}
		if lines, told := log.Told(retriedHoldLine); lines != 1 || told != 1 {
			t.Fatalf("%d INFO lines telling of %d letters once the backend took the hold, want 1 telling of 1", lines, told)
		}
	})
}

// The lines a sequenced source logs when the backend refuses a held key's
// letter, and when it takes it at last.
const (
	refusedHoldLine = "could not hand a letter to the backend; the source keeps it and tries again"
	retriedHoldLine = "handed a letter to the backend after failed attempts"
)

// Guarantee: a consumer that stops while a retry's hold is still refused
// gives that message back with the ones of its key it held back, in
// order: the next consumer of the group receives them first.
func TestRefusedHoldIsGivenBackAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startFailedHoldRun(t, slog.New(slog.DiscardHandler))
		time.Sleep(time.Second)
		synctest.Wait()
		if err := r.p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		rd, err := r.mq.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close(t.Context())
		if got := queuedValues(rd); fmt.Sprint(got) != "[1 2]" {
			t.Fatalf("the next consumer receives %v, want [1 2]", got)
		}
	})
}

// queuedValues returns the values r can receive at once, in order.
func queuedValues(r topology.Reader[int]) []int {
	buf := make([]topology.Letter[int], 16)
	n, _ := r.TryReceive(context.Background(), buf)
	got := make([]int, 0, n)
	for _, l := range buf[:n] {
		got = append(got, l.Value)
	}
	return got
}

// stuckHolds refuses the first Hold at once, then makes every Hold wait
// for its context, as a hold whose broker does not answer does; it reports
// each Hold that started.
type stuckHolds struct {
	topology.Queues[int]
	started chan struct{}
	calls   *atomic.Int64
}

func (q stuckHolds) Hold(ctx context.Context, _ int, _ topology.Letter[int]) error {
	q.started <- struct{}{}
	if q.calls.Add(1) == 1 {
		return errors.New("hold topic unavailable")
	}
	<-ctx.Done()
	return ctx.Err()
}

// startStuckHold starts a pipeline that retries every message, over a
// source whose holds stuckHolds makes, publishes one message and returns
// once the source's own attempt to hand it off again is stuck; q.started
// has room for one more attempt.
func startStuckHold(t *testing.T) (topology.Queues[int], stuckHolds, *pipeline.Pipeline[int, int]) {
	t.Helper()
	_, mq := declareLedger(t)
	q := stuckHolds{Queues: mq, started: make(chan struct{}, 3), calls: new(atomic.Int64)}
	_, p := startPipeline(t, q, func(context.Context, *message.Message[int]) (int, error) {
		return 0, topology.Retry(errors.New("gateway down"))
	})
	pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
	if err := pub.Publish(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	<-q.started // the first hold, in the acknowledgement: refused
	<-q.started // the source's own attempt, after its backoff: stuck
	return mq, q, p
}

// Guarantee: a source that closes while handing a refused retry off again
// does not wait out that attempt: the attempt gives up at once, and the
// letter is given back.
func TestCloseEndsAHandOffUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq, _, p := startStuckHold(t)
		start := time.Now()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("Stop took %v with a hand-off under way, want no wait", waited)
		}
		rd, err := mq.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close(t.Context())
		if got := queuedValues(rd); fmt.Sprint(got) != "[1]" {
			t.Fatalf("the next consumer receives %v, want [1]", got)
		}
	})
}

// Guarantee: an unsequenced retry whose hold the backend fails is kept by
// the source, unsettled (Stats.HandOffKept), and its hold tried again
// with backoff until the backend takes it: it is settled then, and comes
// back from the hold queue, its handler not run again meanwhile; the
// letter counts once in HandOffFailed however many attempts failed.
func TestAnUnsequencedRetryWhoseHoldFailsIsHeldOnceTheBackendTakesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("plain").Hold(time.Second)))
		r := &failedHoldRun{}
		r.refuse.Store(true)
		counted := &failingQueues[int]{Queues: mq}
		q := refusingHolds{Queues: counted, r: r}
		var handled atomic.Int64
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			if handled.Add(1) == 1 {
				return 0, topology.Retry(errors.New("gateway down"))
			}
			return m.Data, nil
		})
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{})
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // fake time: the hold is tried again, in vain
		synctest.Wait()
		if n := r.attempts.Load(); n < 5 {
			t.Fatalf("the hold was tried %d times in a minute, want it tried again by the source", n)
		}
		st := src.Stats()
		if handled.Load() != 1 || st.HandOffKept != 1 || st.HandOffFailed != 1 || counted.settledSoFar() != 0 {
			t.Fatalf("after a minute of failed holds: handled %d times, settled %d, stats %+v; want handled once, not settled, kept, 1 failed hand-off",
				handled.Load(), counted.settledSoFar(), st)
		}
		r.refuse.Store(false)
		time.Sleep(15 * time.Second) // the longest backoff, then the hold's second
		synctest.Wait()
		st = src.Stats()
		if handled.Load() != 2 || st.HandOffKept != 0 || st.Acked != 1 || st.Retried != 1 || st.HandOffFailed != 1 {
			t.Fatalf("once the backend takes holds: handled %d times, stats %+v; want handled again from the hold queue, acked, none kept", handled.Load(), st)
		}
		if n := counted.settledSoFar(); n != 2 {
			t.Fatalf("%d settlings, want 2: the retry once held, then its delivery from the hold queue", n)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// refusingDLQ fails every DeadLetter, as a Pulsar DLQ over a backlog quota
// that refuses producers does.
type refusingDLQ struct{ topology.Queues[int] }

func (refusingDLQ) DeadLetter(context.Context, topology.Letter[int]) error {
	return errors.New("producer blocked: backlog quota exceeded")
}

// Guarantee: a DLQ that refuses every dead letter is counted per letter
// (Stats.HandOffFailed), each kept (Stats.HandOffKept), and logged in a
// few lines, not one per letter nor per attempt: the first at once, the
// ones within 10 s of it counted, and the count of those held back when
// the source closes.
func TestRefusedDeadLettersAreCountedAndLoggedInAFewLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		_, mq := declareMemory(t, build(t, topology.New("refused-dlq").DLQ()))
		q := refusingDLQ{mq}
		var log logtest.Lines
		src, p := startLoggingPipeline(t, q, slog.New(slog.NewTextHandler(&log, nil)), func(context.Context, *message.Message[int]) (int, error) {
			return 0, topology.Reject(errors.New("unparsable"))
		})
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		for i := range n {
			if err := pub.Publish(t.Context(), i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if st := src.Stats(); st.HandOffFailed != n || st.HandOffKept != n || st.DeadLetterFailed != n || st.DeadLettered != 0 {
			t.Errorf("stats %+v, want %d failed hand-offs and dead-letterings, all kept, none dead-lettered", st, n)
		}
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		lines, told := log.Told(refusedHoldLine)
		if lines != 2 || told != n {
			t.Errorf("%d ERROR lines %q telling of %d letters, want 2 (the first, and the count held back at close) telling of %d\n%s",
				lines, refusedHoldLine, told, n, strings.Join(log.All(), ""))
		}
	})
}

// Guarantee: an attempt to hand a refused retry off again whose broker
// does not answer gives up after 30s and is tried again after its
// backoff, so that a hung hold does not hold the key's letter for as long
// as the source runs.
func TestAHandOffAttemptTheBackendDoesNotAnswerGivesUpAfterThirtySeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q, p := startStuckHold(t)
		stuck := time.Now()
		select {
		case <-q.started:
		case <-time.After(10 * time.Minute):
			t.Fatal("no attempt followed the stuck one within 10 minutes: a hand-off the backend does not answer waits for ever")
		}
		// The stuck attempt's 30s, then the backoff after two failures.
		if waited, want := time.Since(stuck), 30*time.Second+200*time.Millisecond; waited != want {
			t.Fatalf("the next attempt came %v after the stuck one began, want %v", waited, want)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// unansweredHolds refuses each letter's first Hold at once, then makes
// every later Hold wait for its context, as a hold topic whose broker
// stops answering does, until answer is set; it counts the Holds waiting
// and the most at once.
type unansweredHolds struct {
	topology.Queues[int]
	answer  atomic.Bool
	mu      sync.Mutex
	seen    map[int]bool
	waiting int
	most    int
}

func (q *unansweredHolds) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	if q.answer.Load() {
		return q.Queues.Hold(ctx, i, l)
	}
	q.mu.Lock()
	if !q.seen[l.Value] {
		q.seen[l.Value] = true
		q.mu.Unlock()
		return errors.New("hold topic unavailable")
	}
	q.waiting++
	q.most = max(q.most, q.waiting)
	q.mu.Unlock()
	<-ctx.Done()
	q.mu.Lock()
	q.waiting--
	q.mu.Unlock()
	return ctx.Err()
}

// Guarantee: a sequenced source whose backend refuses the holds of many
// keys' retries, and then stops answering, tries them again one at a
// time: the letters wait in one queue on one timer, not on a timer and a
// goroutine each that all wait on the backend at once.
func TestRefusedHoldsOfManyKeysAreTriedAgainOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys = 200
		_, mq := declareLedger(t)
		q := &unansweredHolds{Queues: mq, seen: map[int]bool{}}
		var handled atomic.Int64
		_, p := startPipeline(t, q, func(context.Context, *message.Message[int]) (int, error) {
			handled.Add(1)
			return 0, topology.Retry(errors.New("gateway down"))
		})
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{Key: func(v int) string { return fmt.Sprint(v) }})
		for v := range keys {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := handled.Load(); n != keys {
			t.Fatalf("handled %d messages, want %d", n, keys)
		}
		time.Sleep(time.Minute) // the backoffs and unanswered attempts, in fake time
		synctest.Wait()
		q.mu.Lock()
		most := q.most
		q.mu.Unlock()
		if most != 1 {
			t.Fatalf("%d attempts waited on the backend at once for %d letters whose hold it refused, want 1: one attempt at a time, not one per letter", most, keys)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: a sequenced source keeps at most MaxHeldBack letters whose
// hand-off the backend refused and that it tries again itself: at that
// bound it takes no new letter (backpressure: the others wait in the
// backend) until one of them is handed off, so that a backend refusing
// holds for a long time bounds the source's memory however many keys
// come by; it takes letters again once the backend takes the holds.
func TestRefusedHandOffsOfMaxHeldBackKeysStopTheSourceTakingLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys, maxHeldBack = 2000, 8
		_, mq := declareLedger(t)
		q := &unansweredHolds{Queues: mq, seen: map[int]bool{}}
		var handled atomic.Int64
		src, p := startBoundedPipeline(t, q, maxHeldBack, &handled, topology.Retry(errors.New("gateway down")))
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{Key: func(v int) string { return fmt.Sprint(v) }})
		for v := range keys {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute) // fake time
		synctest.Wait()
		// What the pipeline holds in flight (its permit window, its
		// processor and acknowledgement batches) comes on top of the
		// letters kept: far fewer than the keys all the same.
		if n, most := handled.Load(), int64(keys/10); n > most {
			t.Fatalf("the source took %d letters of %d keys while the backend refused their holds, want it to stop taking them once MaxHeldBack (%d) wait for a hand-off: at most %d with what the pipeline holds in flight", n, keys, maxHeldBack, most)
		}
		q.answer.Store(true)
		time.Sleep(time.Hour) // fake time: the attempts under way time out, the next ones succeed
		synctest.Wait()
		if n := src.Stats().Received; n < keys {
			t.Fatalf("the source took %d letters of %d keys once the backend took the holds again, want all", n, keys)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// holdsRefusedFor refuses every Hold of value 1, and the first Hold of
// any other value, recording when each value's Holds were tried.
type holdsRefusedFor struct {
	topology.Queues[int]
	mu    sync.Mutex
	tried map[int][]time.Time
}

func (q *holdsRefusedFor) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	q.mu.Lock()
	q.tried[l.Value] = append(q.tried[l.Value], time.Now())
	n := len(q.tried[l.Value])
	q.mu.Unlock()
	if l.Value == 1 || n == 1 {
		return errors.New("hold topic unavailable")
	}
	return q.Queues.Hold(ctx, i, l)
}

// Guarantee: a retry whose hold is refused is tried again after its own
// backoff (100ms the first time), even while another key's letter waits
// out a longer one: the letters waiting for an attempt are taken in the
// order of their next attempt.
func TestARefusedHoldIsTriedAgainAfterItsOwnBackoffBesideALongerOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareLedger(t)
		q := &holdsRefusedFor{Queues: mq, tried: map[int][]time.Time{}}
		p := startPipelineOf(t, "ledger", newSource(t, q), func(_ context.Context, m *message.Message[int]) (int, error) {
			if d, _ := topology.DeliveryOf(m); d.Retries == 0 {
				return 0, topology.Retry(errors.New("gateway down"))
			}
			return m.Data, nil
		})
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{Key: func(v int) string { return fmt.Sprint(v) }})
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second) // fake time: 1's backoff has grown past 6s
		if err := pub.Publish(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		q.mu.Lock()
		tried := slices.Clone(q.tried[2])
		q.mu.Unlock()
		if len(tried) < 2 {
			t.Fatalf("the hold of 2 was tried %d times in 5s, want it tried again after 100ms", len(tried))
		}
		if got := tried[1].Sub(tried[0]); got != handOffFirstBackoff {
			t.Fatalf("the hold of 2 was tried again %v after it was refused, want %v: its own backoff, not 1's", got, handOffFirstBackoff)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// handOffFirstBackoff is the wait before a source first hands a refused
// letter off again.
const handOffFirstBackoff = 100 * time.Millisecond

// newSource returns a source of q that logs nothing.
func newSource(t *testing.T, q topology.Queues[int]) *topology.Source[int] {
	t.Helper()
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// holdsRefusedWhile refuses every Hold while refuse is set, counting the
// Holds refused of each value.
type holdsRefusedWhile struct {
	topology.Queues[int]
	refuse  atomic.Bool
	mu      sync.Mutex
	refused map[int]int
}

func (q *holdsRefusedWhile) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	if q.refuse.Load() {
		q.mu.Lock()
		q.refused[l.Value]++
		q.mu.Unlock()
		return errors.New("hold topic unavailable")
	}
	return q.Queues.Hold(ctx, i, l)
}

// doublings returns how many of the refusals counted in q make a power of
// two of a letter's failed attempts: the refusals a source may log.
func (q *holdsRefusedWhile) doublings() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, refused := range q.refused {
		n += bits.Len(uint(refused))
	}
	return n
}

// Guarantee: a sequenced source whose backend refuses the holds of many
// keys' retries for an hour logs a few lines an interval
// (logburst.Interval), not some per letter: the refusals of all its
// letters share one line an interval, the first at once, each line
// counting those held back since the last (the count of the last ones
// logged as the source closes), and so do the letters the backend takes
// at last.
func TestHoldsOfManyKeysRefusedForAnHourAreLoggedInAFewLinesAnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys, outage, recovery = 200, time.Hour, 15 * time.Second
		_, mq := declareLedger(t)
		q := &holdsRefusedWhile{Queues: mq, refused: map[int]int{}}
		q.refuse.Store(true)
		var log logtest.Lines
		var handled atomic.Int64
		_, p := startLoggingPipeline(t, q, slog.New(slog.NewTextHandler(&log, nil)), func(_ context.Context, m *message.Message[int]) (int, error) {
			handled.Add(1)
			if d, _ := topology.DeliveryOf(m); d.Retries == 0 {
				return 0, topology.Retry(errors.New("gateway down"))
			}
			return m.Data, nil
		})
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{Key: func(v int) string { return fmt.Sprint(v) }})
		for v := range keys {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(outage) // fake time
		synctest.Wait()
		q.refuse.Store(false)
		time.Sleep(recovery) // the longest backoff, then the hold's second
		synctest.Wait()
		if n := handled.Load(); n != 2*keys {
			t.Fatalf("handled %d messages, want %d: each key's retry once the backend took its hold", n, 2*keys)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		refused, refusals := log.Told(refusedHoldLine)
		if most := 2 + int(outage/logburst.Interval); refused > most {
			t.Errorf("%d ERROR lines for %d keys' holds refused for %v, want at most %d: one an interval, and the count held back at close", refused, keys, outage, most)
		}
		if want := q.doublings(); refusals != want {
			t.Errorf("the ERROR lines tell of %d refusals, want %d: each letter's first and each doubling of its failed attempts, logged or counted", refusals, want)
		}
		took, letters := log.Told(retriedHoldLine)
		if most := 2 + int(recovery/logburst.Interval); took > most {
			t.Errorf("%d INFO lines for the %d letters the backend took at last, want at most %d: one an interval, and the count held back at close", took, keys, most)
		}
		if letters != keys {
			t.Errorf("the INFO lines tell of %d letters the backend took, want %d", letters, keys)
		}
	})
}

// settledSoFar returns how many letters q's readers settled so far.
func (q *failingQueues[T]) settledSoFar() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, r := range q.readers {
		n += r.settled
	}
	return n
}

// switchableDLQ fails every DeadLetter while refuse is set, as a DLQ
// whose WRITE an ACL change took away does until it is granted back.
type switchableDLQ struct {
	topology.Queues[int]
	refuse atomic.Bool
}

func (q *switchableDLQ) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	if q.refuse.Load() {
		return errors.New("DLQ topic not authorized")
	}
	return q.Queues.DeadLetter(ctx, l)
}

// Guarantee: a source of a topology that is not sequenced keeps at most
// MaxHeldBack letters whose dead-lettering the backend fails: at that
// bound it takes no new letter (backpressure: the others wait in the
// backend, none is lost) until the DLQ takes one of them, and once it
// does the source hands off those it kept and takes the rest.
func TestAtMaxHeldBackKeptHandOffsAnUnsequencedSourceTakesNoNewLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const letters, maxHeldBack = 2000, 8
		_, mq := declareMemory(t, build(t, topology.New("plain").DLQ()))
		q := &switchableDLQ{Queues: mq}
		q.refuse.Store(true)
		var handled atomic.Int64
		src, p := startBoundedPipeline(t, q, maxHeldBack, &handled, topology.Reject(errors.New("unparsable")))
		publishAll(t, mq, letters)
		time.Sleep(time.Minute) // fake time
		synctest.Wait()
		// What the pipeline holds in flight comes on top of the letters
		// kept: far fewer than the letters all the same.
		st := src.Stats()
		if n, most := handled.Load(), int64(letters/10); n > most || st.HandOffKept < maxHeldBack {
			t.Fatalf("the source took %d letters of %d and keeps %d while the DLQ failed them, want it to stop taking them once MaxHeldBack (%d) are kept: at most %d with what the pipeline holds in flight",
				n, letters, st.HandOffKept, maxHeldBack, most)
		}
		q.refuse.Store(false)
		time.Sleep(time.Minute) // fake time: the kept letters are handed off, the rest taken
		synctest.Wait()
		if st := src.Stats(); st.Received != letters || st.DeadLettered != letters || st.HandOffKept != 0 || handled.Load() != letters {
			t.Fatalf("once the DLQ takes letters again: handled %d, stats %+v; want all %d received, handled once and dead-lettered, none kept", handled.Load(), st, letters)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// startBoundedPipeline starts a pipeline over a source of q that keeps
// at most maxHeldBack letters, with a small permit window, whose handler
// counts each message in handled and fails it with fail.
func startBoundedPipeline(t *testing.T, q topology.Queues[int], maxHeldBack int, handled *atomic.Int64, fail error) (*topology.Source[int], *pipeline.Pipeline[int, int]) {
	t.Helper()
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxHeldBack: maxHeldBack, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	flow := producer.Flow{Initial: 4, Threshold: 2, Refill: 2}
	p := startPipelineOf(t, q.Topology().Name(), src, func(context.Context, *message.Message[int]) (int, error) {
		handled.Add(1)
		return 0, fail
	}, func(o *pipeline.Options[int, int]) { o.Producer.Flow = flow })
	return src, p
}
