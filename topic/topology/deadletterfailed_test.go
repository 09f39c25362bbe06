package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// choosyDLQ hands holds and dead letters to its queues, except those of
// the letters it is told to fail: the first failures holds of a letter in
// failHold and dead-letterings of one in failDead fail with a broker's
// error, and the first dead-lettering of one in fullOnce is refused for
// room (ErrFull): the source keeps each and hands it off again.
type choosyDLQ struct {
	topology.Queues[int]
	failHold, failDead func(v int) bool
	fullOnce           func(v int) bool
	failures           int

	mu     sync.Mutex
	full   map[int]bool // the letters of fullOnce refused so far
	failed map[int]int  // the hand-offs of each letter failed so far
}

// fails reports whether the hand-off of v, one to fail, fails this time.
func (q *choosyDLQ) fails(v int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failed[v] >= q.failures {
		return false
	}
	q.failed[v]++
	return true
}

func (q *choosyDLQ) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	if q.failHold != nil && q.failHold(l.Value) && q.fails(l.Value) {
		return errors.New("hold topic unavailable")
	}
	return q.Queues.Hold(ctx, i, l)
}

func (q *choosyDLQ) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	if q.failDead != nil && q.failDead(l.Value) && q.fails(l.Value) {
		return errors.New("producer blocked: backlog quota exceeded")
	}
	if q.fullOnce != nil && q.fullOnce(l.Value) {
		q.mu.Lock()
		refused := q.full[l.Value]
		q.full[l.Value] = true
		q.mu.Unlock()
		if !refused {
			return fmt.Errorf("dlq: %w", topology.ErrFull)
		}
	}
	return q.Queues.DeadLetter(ctx, l)
}

// publishAll publishes 0, ..., n-1 to q.
func publishAll(t *testing.T, q topology.Queues[int], n int) {
	t.Helper()
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
	if err != nil {
		t.Fatal(err)
	}
	for v := range n {
		if err := pub.Publish(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: a letter whose dead-lettering the backend fails, again and
// again, is counted once in DeadLetterFailed (and in HandOffFailed) and
// in DeadLettered once the DLQ takes it, a hold failed again and again
// once in HandOffFailed and in Retried, and a dead-lettering a full DLQ
// refused once, then took, only in DeadLettered: once the source is idle,
// keeping nothing, Received = Acked + Retried + Deferred + Requeued +
// DeadLettered + Discarded.
func TestFailedHandOffsAreCountedOnceAndTheOutcomesAddUpToReceivedOnceTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// v%4: 0 rejected, its dead-lettering fails 3 times; 1 retried
		// once, its hold fails 3 times; 2 rejected, the last of them
		// refused for room once (the hand-offs behind a refused one wait
		// for it); 3 acked.
		const n = 40
		_, mq := declareMemory(t, build(t, topology.New("choosy").Hold(time.Second).DLQ()))
		q := &choosyDLQ{Queues: mq, full: map[int]bool{}, failed: map[int]int{}, failures: 3,
			failDead: func(v int) bool { return v%4 == 0 },
			failHold: func(v int) bool { return v%4 == 1 },
			fullOnce: func(v int) bool { return v == n-2 }}
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			d, _ := topology.DeliveryOf(m)
			switch {
			case m.Data%4 == 0 || m.Data%4 == 2:
				return 0, topology.Reject(errors.New("bad input"))
			case m.Data%4 == 1 && d.Retries == 0:
				return 0, topology.Retry(errors.New("gateway down"))
			}
			return m.Data, nil
		})
		readings := &statsReadings{t: t, src: src}
		publishAll(t, q, n)
		readings.until("handling", func(st topology.Stats) bool {
			return st.Acked == n/2 && st.DeadLettered == n/2 && st.HandOffKept == 0 && st.Refused == 0
		})
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := readings.read("once stopped")
		if st.DeadLetterFailed != n/4 || st.Retried != n/4 || st.HandOffFailed != n/2 || st.Discarded != 0 {
			t.Errorf("once stopped: %+v; want %d failed dead-letterings, %d retried, %d failed hand-offs, none discarded", st, n/4, n/4, n/2)
		}
		if !q.full[n-2] {
			t.Errorf("letter %d was never refused for room", n-2)
		}
		if sum := outcomes(st); st.Received != n+n/4 || sum != st.Received {
			t.Errorf("once stopped: %d received, the outcomes add up to %d: %+v; want %d and %d", st.Received, sum, st, n+n/4, n+n/4)
		}
	})
}

// Guarantee: a dead source's letter whose putting back on the DLQ the
// backend fails, again and again, is counted once in DeadLetterFailed and
// in DeadLettered once the DLQ takes it: once the source is idle, its
// Received is the sum of its outcomes.
func TestADeadSourcesFailedPutBacksAreCountedOnceAndItsOutcomesAddUpToReceived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 30 // v%3: 0 fails once, its putting back fails 3 times; 1 fails once, put back; 2 acked
		_, mq := declareMemory(t, build(t, topology.New("choosy").DLQ()))
		death := &topology.Death{Reason: topology.ReasonRejected, Error: "bad input", Topic: "choosy", Group: "choosy"}
		for v := range n {
			if err := mq.DeadLetter(t.Context(), topology.Letter[int]{Value: v, Death: death}); err != nil {
				t.Fatal(err)
			}
		}
		q := &choosyDLQ{Queues: mq, failed: map[int]int{}, failures: 3, failDead: func(v int) bool { return v%3 == 0 }}
		src, err := topology.NewDeadSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		calls := map[int]int{}
		p := startPipelineOf(t, "choosy-dead", src, func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			calls[m.Data]++
			if m.Data%3 != 2 && calls[m.Data] == 1 {
				return 0, errors.New("still failing")
			}
			return m.Data, nil
		})
		readings := &statsReadings{t: t, src: src}
		readings.until("handling", func(st topology.Stats) bool { return st.Acked == n && st.HandOffKept == 0 })
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := readings.read("once stopped")
		if st.DeadLetterFailed != n/3 || st.HandOffFailed != n/3 || st.DeadLettered != 2*n/3 {
			t.Errorf("once stopped: %+v; want %d failed put-backs counted once each, %d put back", st, n/3, 2*n/3)
		}
		if sum := outcomes(st); st.Received != n+2*n/3 || sum != st.Received {
			t.Errorf("once stopped: %d received, the outcomes add up to %d: %+v; want %d and %d", st.Received, sum, st, n+2*n/3, n+2*n/3)
		}
	})
}
