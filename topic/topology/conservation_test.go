package topology_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// sourceCounters are the counters of a source's Stats that never go down.
func sourceCounters(st topology.Stats) []uint64 {
	return []uint64{st.Received, st.Acked, st.Retried, st.Deferred, st.Requeued, st.DeadLettered, st.Discarded,
		st.DeadLetteredBy.Rejected, st.DeadLetteredBy.MaxRetries, st.DeadLetteredBy.Timeout, st.DeadLetteredBy.Poisoned,
		st.Poisoned, st.SettleFailed, st.HandOffFailed, st.DeadLetterFailed}
}

// statsReadings checks the readings of a source's Stats: no counter goes
// down from one reading to the next, no reading shows more letters with
// an outcome than received, and DeadLetteredBy adds up to DeadLettered.
type statsReadings struct {
	t    *testing.T
	src  *topology.Source[int]
	prev []uint64
}

func (r *statsReadings) read(when string) topology.Stats {
	r.t.Helper()
	st := r.src.Stats()
	cur := sourceCounters(st)
	for i := range r.prev {
		if cur[i] < r.prev[i] {
			r.t.Fatalf("%s: counter %d went down from %d to %d: %+v", when, i, r.prev[i], cur[i], st)
		}
	}
	r.prev = cur
	if outcomes(st) > st.Received {
		r.t.Fatalf("%s: %d letters with an outcome of %d received: %+v", when, outcomes(st), st.Received, st)
	}
	by := st.DeadLetteredBy
	if by.Rejected+by.MaxRetries+by.Timeout+by.Poisoned != st.DeadLettered {
		r.t.Fatalf("%s: DeadLetteredBy %+v does not add up to DeadLettered %d", when, by, st.DeadLettered)
	}
	return st
}

// until reads the source's Stats every 100ms until cond holds of a
// reading, and returns it; it fails after a minute (a bubble's time).
func (r *statsReadings) until(when string, cond func(topology.Stats) bool) topology.Stats {
	r.t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st := r.read(when)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: still %+v after a minute", when, st)
		}
	}
}

// Guarantee: on a bad day (letters rejected, retried until they are
// dead-lettered, retried once then acked, deferred once; then the DLQ
// replayed and every letter acked), a source counts every letter it
// received exactly once by its outcome: once idle, Received = Acked +
// Retried + Deferred + Requeued + DeadLettered + Discarded, DeadLetteredBy
// adds up to DeadLettered, every letter published is acked once in the
// end, and no counter read in between went down.
func TestSourceStatsAddUpThroughRetriesDeadLettersAndAReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		_, q := declareMemory(t, build(t, topology.New("badday").Hold(time.Second).Hold(2*time.Second).DLQ()))
		var mu sync.Mutex
		calls, acked := map[int]int{}, map[int]int{}
		replayed := false
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			v := m.Data
			calls[v]++
			fail := func(err error) (int, error) { return 0, err }
			switch {
			case replayed:
			case v%5 == 0:
				return fail(topology.Reject(errors.New("bad input")))
			case v%5 == 1:
				return fail(topology.Retry(errors.New("gateway down")))
			case v%5 == 2 && calls[v] == 1:
				return fail(topology.Retry(errors.New("blip")))
			case v%5 == 3 && calls[v] == 1:
				return fail(topology.Defer())
			}
			acked[v]++
			return v, nil
		}, func(o *pipeline.Options[int, int]) { o.Processors.Concurrency = 4 })
		readings := &statsReadings{t: t, src: src}
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := pub.Publish(t.Context(), i); err != nil {
				t.Fatal(err)
			}
			if i%20 == 0 {
				readings.read("while publishing")
			}
		}
		// 40 rejected at once, 40 dead after their retries; 40 retried once.
		const dead, retried = 2 * n / 5, n/5*topology.DefaultMaxRetries + n/5
		quiet := func(st topology.Stats) bool { return st.Received == outcomes(st) }
		st := readings.until("before the replay", func(st topology.Stats) bool { return quiet(st) && st.DeadLettered >= dead })
		if st.Acked != n-dead || st.DeadLettered != dead || st.DeadLetteredBy.Rejected != dead/2 || st.DeadLetteredBy.MaxRetries != dead/2 ||
			st.Retried != retried || st.Deferred != n/5 || st.Discarded != 0 || st.Requeued != 0 {
			t.Errorf("before the replay: %+v; want %d acked, %d dead-lettered (%d rejected, %d after their retries), %d retried, %d deferred",
				st, n-dead, dead, dead/2, dead/2, retried, n/5)
		}
		mu.Lock()
		replayed = true
		mu.Unlock()
		rep, err := topology.Replay(t.Context(), q, topology.ReplayOptions[int]{})
		if err != nil || len(rep.Replayed) != dead {
			t.Fatalf("Replay = %d replayed, %v; want %d", len(rep.Replayed), err, dead)
		}
		readings.until("after the replay", func(st topology.Stats) bool { return quiet(st) && st.Acked >= n })
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		st = readings.read("once stopped")
		if st.Received != outcomes(st) || st.Acked != n || st.DeadLettered != dead || st.Received != n+dead+st.Retried+st.Deferred ||
			st.Subscriptions != 0 || st.HeldBack != 0 || st.Refused != 0 {
			t.Errorf("once stopped: %+v; want received = the outcomes, %d acked, %d dead-lettered, every delivery received once, no reader open, nothing held back or refused", st, n, dead)
		}
		mu.Lock()
		defer mu.Unlock()
		for v := range n {
			if acked[v] != 1 {
				t.Errorf("letter %d acked %d times", v, acked[v])
			}
		}
	})
}

// Guarantee: a retried, deferred or requeued letter of a broadcast
// topology, which has no hold queue and cannot be delivered again, is
// counted once, as discarded: a reading never shows more letters with an
// outcome than letters received.
func TestABroadcastRetryIsCountedOnceAsDiscarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("fanout").Broadcast()))
		errs := []error{topology.Retry(errors.New("blip")), topology.Defer(), nil}
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			if err := errs[m.Data]; err != nil {
				return 0, err
			}
			return 0, errors.New("a plain failure")
		})
		readings := &statsReadings{t: t, src: src}
		readings.until("subscribing", func(st topology.Stats) bool { return st.Subscriptions > 0 })
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err != nil {
			t.Fatal(err)
		}
		for v := range errs {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		readings.until("handling", func(st topology.Stats) bool { return st.Received == 3 && outcomes(st) >= 3 })
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := readings.read("once stopped")
		if st.Received != 3 || st.Discarded != 3 || outcomes(st) != 3 {
			t.Errorf("a broadcast retry, defer and plain failure: %+v; want 3 received, 3 discarded, nothing else", st)
		}
	})
}

// Guarantee: a letter of a sequenced topology whose handling a shutdown
// elsewhere interrupted while the source runs (a downstream's, wrapped in
// acker.ErrShutdown) is requeued in its key's turn and delivered again,
// and that delivery is counted as received, as every delivery of a
// requeued letter is: once idle, Received is the sum of the outcomes.
func TestASequencedRequeueDeliveredAgainCountsAsReceivedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("seqreq").Sequenced(topology.Skip).Hold(time.Second).DLQ()))
		var calls atomic.Int32
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			if calls.Add(1) == 1 {
				return 0, &acker.ShutdownError{Err: context.Canceled}
			}
			return m.Data, nil
		})
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		readings := &statsReadings{t: t, src: src}
		st := readings.until("handling", func(st topology.Stats) bool { return st.Acked == 1 })
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		st = readings.read("once stopped")
		if st.Received != 2 || st.Requeued != 1 || st.Acked != 1 || outcomes(st) != st.Received {
			t.Errorf("a letter interrupted, then acked: %+v; want 2 received, 1 requeued, 1 acked", st)
		}
	})
}

// Guarantee: a letter of a broadcast topology whose handling the
// pipeline's shutdown interrupted is counted once, as discarded, not also
// as requeued: a broadcast topology cannot deliver it again.
func TestABroadcastLetterInterruptedByTheShutdownIsCountedOnceAsDiscarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("fanout").Broadcast()))
		src, p := startPipeline(t, q, func(ctx context.Context, _ *message.Message[int]) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		}, func(o *pipeline.Options[int, int]) { o.ShutdownTimeout = time.Second })
		readings := &statsReadings{t: t, src: src}
		readings.until("subscribing", func(st topology.Stats) bool { return st.Subscriptions > 0 })
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		readings.until("receiving", func(st topology.Stats) bool { return st.Received == 1 })
		_ = p.Stop(context.Background())
		st := readings.read("once stopped")
		if st.Received != 1 || st.Discarded != 1 || outcomes(st) != 1 {
			t.Errorf("a broadcast letter interrupted by the shutdown: %+v; want 1 received, 1 discarded, nothing else", st)
		}
	})
}
