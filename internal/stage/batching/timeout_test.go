package batching_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: BatchTimeout runs from a batch's first message, not its latest:
// a key that keeps receiving messages, never far enough apart for a timeout
// of their own, still has its batches emitted with trigger timeout while the
// messages keep coming.
func TestBatchTimeoutNotExtendedByLaterMessages(t *testing.T) {
	const (
		timeout    = 100 * time.Millisecond
		gap        = 10 * time.Millisecond
		publishFor = 10 * timeout
	)
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{BatchSize: 1_000_000, BatchTimeout: timeout})
	first := time.Now()
	n := 0
	// The pauses are not synchronisation: they keep key k receiving
	// messages for ten timeouts, never long enough apart for a timeout each.
	for time.Since(first) < publishFor {
		h.publish(t, msg(rec, n, "k"))
		n++
		time.Sleep(gap)
	}
	b := h.next(t)
	if b.info.Trigger != message.TriggerTimeout || b.ids[0] != 0 {
		t.Errorf("first batch %+v ids %v, want message 0's batch with trigger timeout", b.info, b.ids)
	}
	// Were the timeout extended by every message, the first batch would only
	// be emitted after the last one, holding all of them.
	if len(b.ids) == n {
		t.Errorf("the first batch holds all %d messages: later messages extended its %v timeout", n, timeout)
	}
	h.drain(t)
	assertOnce(t, rec, span(0, n))
}

// Guarantee: a message whose PartitionBy panicked joins no batch: neither the
// batch handler nor HandleFailed sees it, and it is acknowledged once, as
// failed with a *message.PanicError.
func TestPartitionByPanicJoinsNoBatch(t *testing.T) {
	rec := acker.NewRecorder(false)
	var hooked atomic.Int64
	h := start(t, batcher.Options[int]{
		BatchSize:    3,
		BatchTimeout: never,
		Concurrency:  2,
		PartitionBy: func(m *message.Message[int]) string {
			if m.Data == 4 {
				panic("no key")
			}
			return m.BatchKey()
		},
		HandleFailed: func(context.Context, []*message.Message[int], message.BatchInfo) { hooked.Add(1) },
	})
	h.publish(t, msgs(rec, 0, 9, "k")...)
	batches := h.drain(t)

	assertOnce(t, rec, span(0, 9))
	for _, b := range batches {
		if slices.Contains(b.ids, 4) {
			t.Errorf("batch %+v ids %v holds message 4, whose PartitionBy panicked", b.info, b.ids)
		}
	}
	f := rec.Failed()
	var pe *message.PanicError
	if len(f) != 1 || f[0].ID != 4 || !errors.As(f[0].Err, &pe) || pe.Value != "no key" {
		t.Errorf("failed outcomes %v, want message 4 with a *message.PanicError", f)
	}
	if hooked.Load() != 0 {
		t.Errorf("HandleFailed called %d times, want never: no batch had a failed message", hooked.Load())
	}
}

// Guarantee: HandleFailed is called only for batches with failed messages,
// and sees only the failed messages of its own batch.
func TestHandleFailedSeesOnlyItsOwnBatchFailures(t *testing.T) {
	rec := acker.NewRecorder(false)
	var mu sync.Mutex
	var calls [][]int
	h := start(t, batcher.Options[int]{
		BatchSize:    3,
		BatchTimeout: never,
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			for _, m := range batch {
				if m.Data == 1 || m.Data == 4 { // batches [0 1 2] and [3 4 5]; [6 7 8] is clean
					m.Fail(errors.New("bad"))
				}
			}
			return nil
		},
		HandleFailed: func(_ context.Context, failed []*message.Message[int], _ message.BatchInfo) {
			var seen []int
			for _, m := range failed {
				seen = append(seen, m.Data)
			}
			mu.Lock()
			calls = append(calls, seen)
			mu.Unlock()
		},
	})
	for i := 0; i < 9; i += 3 {
		h.publish(t, msgs(rec, i, 3, "")...)
		h.next(t)
	}
	h.drain(t)

	assertOnce(t, rec, span(0, 9))
	mu.Lock()
	defer mu.Unlock()
	if !slices.EqualFunc(calls, [][]int{{1}, {4}}, slices.Equal) {
		t.Errorf("HandleFailed saw %v, want [[1] [4]]: once per batch with failures, only that batch's", calls)
	}
}

// Guarantee: a batch whose timeout passes while the batcher is busy is
// emitted with trigger timeout after the chunk being handled, even when
// more messages are already waiting, so that a steady stream of messages
// never holds a timed-out batch back until the queue runs dry.
func TestBatchTimeoutFiresWhileMessagesKeepComing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 50 * time.Millisecond
		gate := make(chan struct{})
		var mu sync.Mutex
		var order []string // the batches handled: key and trigger
		s := batching.New(batcher.Options[int]{
			Name: "steady", BatchSize: 10, BatchTimeout: timeout, MaxDemand: 1,
			// Message 1 holds the partition in its chunk until the test
			// has let the timeout pass.
			Weight: func(m *message.Message[int]) int {
				if m.Data == 1 {
					<-gate
				}
				return 1
			},
			MaxWeight: 1 << 20,
			Handle: func(_ context.Context, batch []*message.Message[int], info message.BatchInfo) error {
				mu.Lock()
				order = append(order, info.BatchKey+"/"+info.Trigger.String())
				mu.Unlock()
				return nil
			},
		}.WithDefaults(), batching.Config{Name: t.Name()})
		ctx, cancel := context.WithCancel(t.Context())
		done := stagetest.Go(ctx, s)
		rec := acker.NewRecorder(false)
		publish := func(ms ...*message.Message[int]) { publishAll(ctx, t, s, ms...) }
		publish(msg(rec, 0, "a")) // opens batch a; its timeout starts
		synctest.Wait()
		publish(msg(rec, 1, "b")) // the partition waits in Weight
		synctest.Wait()
		publish(msgs(rec, 2, 40, "b")...) // queued behind it
		time.Sleep(2 * timeout)           // batch a's timeout passes
		close(gate)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(order)
		mu.Unlock()
		// Batch a timed out before b's messages 2 to 9 were taken, which
		// complete b's first batch.
		if len(got) == 0 || got[0] != "a/timeout" {
			t.Errorf("batches handled %v, want a/timeout first", got)
		}
		s.CloseInput()
		synctest.Wait()
		cancel()
		<-done
	})
}

// emission is a batch a deadline test saw emitted.
type emission struct {
	key     string
	ids     []int
	trigger message.Trigger
	at      time.Duration // since the test began
}

// deadlineRun runs, in a synctest bubble, a batcher of batches of
// batchSize and a BatchTimeout of one second, and script on it: publish
// hands it messages and waits until the batcher is idle; check advances the
// bubble's clock to when (since the test began) and fails unless want is
// what was emitted meanwhile. It then drains the batcher and checks that
// each of the n messages script published was acknowledged once.
func deadlineRun(t *testing.T, batchSize, n int, script func(rec *acker.Recorder, publish func(...*message.Message[int]), check func(time.Duration, ...emission))) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []emission
		rec := acker.NewRecorder(false)
		begin := time.Now()
		s := batching.New(batcher.Options[int]{
			Name: "deadline", BatchSize: batchSize, BatchTimeout: time.Second,
			Handle: func(_ context.Context, batch []*message.Message[int], info message.BatchInfo) error {
				e := emission{key: info.BatchKey, trigger: info.Trigger, at: time.Since(begin)}
				for _, m := range batch {
					e.ids = append(e.ids, m.Data)
				}
				mu.Lock()
				got = append(got, e)
				mu.Unlock()
				return nil
			},
		}.WithDefaults(), batching.Config{Name: t.Name()})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := stagetest.Go(ctx, s)
		publish := func(ms ...*message.Message[int]) {
			t.Helper()
			publishAll(ctx, t, s, ms...)
			synctest.Wait()
		}
		check := func(when time.Duration, want ...emission) {
			t.Helper()
			time.Sleep(when - time.Since(begin))
			synctest.Wait()
			mu.Lock()
			e := got
			got = nil
			mu.Unlock()
			if !slices.EqualFunc(e, want, func(a, b emission) bool {
				return a.key == b.key && slices.Equal(a.ids, b.ids) && a.trigger == b.trigger && a.at == b.at
			}) {
				t.Fatalf("by %v emitted %+v, want %+v", when, e, want)
			}
		}
		script(rec, publish, check)
		s.CloseInput()
		<-done
		assertOnce(t, rec, span(0, n))
	})
}

// Guarantee: a batch that does not fill up is emitted exactly when
// BatchTimeout has passed since its first message: not a moment before,
// not later, whatever messages join it meanwhile, whatever other keys'
// batches open or time out in between; a key's next batch times out from
// its own first message.
func TestBatchTimeoutEmitsExactlyAtTheDeadline(t *testing.T) {
	const timeout = time.Second
	deadlineRun(t, 100, 4, func(rec *acker.Recorder, publish func(...*message.Message[int]), check func(time.Duration, ...emission)) {
		publish(msg(rec, 0, "a")) // a's deadline: 1s
		check(400 * time.Millisecond)
		publish(msg(rec, 1, "b")) // b's deadline: 1.4s
		check(700 * time.Millisecond)
		publish(msg(rec, 2, "a")) // joins a; its deadline stays 1s
		check(timeout - time.Nanosecond)
		check(timeout, emission{"a", []int{0, 2}, message.TriggerTimeout, timeout})
		publish(msg(rec, 3, "a")) // a's next batch: deadline 2s
		check(1400*time.Millisecond - time.Nanosecond)
		check(1400*time.Millisecond, emission{"b", []int{1}, message.TriggerTimeout, 1400 * time.Millisecond})
		check(2*timeout - time.Nanosecond)
		check(2*timeout, emission{"a", []int{3}, message.TriggerTimeout, 2 * timeout})
	})
}

// Guarantee: a batch emitted by size before its timeout does not disturb
// the order in which the others time out: when its bookkeeping is reused
// by a batch opened later, a batch opened in between still times out at
// its own deadline, before the later one.
func TestABatchEmittedBySizeDoesNotDelayTheTimeoutOfAnother(t *testing.T) {
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	deadlineRun(t, 2, 5, func(rec *acker.Recorder, publish func(...*message.Message[int]), check func(time.Duration, ...emission)) {
		publish(msg(rec, 0, "c")) // c's deadline: 1s
		check(ms(100))
		publish(msg(rec, 1, "a")) // a's deadline: 1.1s
		check(ms(150))
		publish(msg(rec, 2, "d")) // d's deadline: 1.15s
		check(ms(200))
		publish(msg(rec, 3, "a")) // fills a's batch
		check(ms(300), emission{"a", []int{1, 3}, message.TriggerSize, ms(200)})
		publish(msg(rec, 4, "b")) // b's deadline: 1.3s
		check(ms(1000), emission{"c", []int{0}, message.TriggerTimeout, ms(1000)})
		check(ms(1150) - 1)
		check(ms(1150), emission{"d", []int{2}, message.TriggerTimeout, ms(1150)})
		check(ms(1300), emission{"b", []int{4}, message.TriggerTimeout, ms(1300)})
	})
}
