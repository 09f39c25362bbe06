package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// deadLetters returns every letter q's DLQ holds, taken from it.
func deadLetters(t *testing.T, q topology.Queues[int]) []topology.Letter[int] {
	t.Helper()
	r, err := q.SubscribeDead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	buf := make([]topology.Letter[int], 8)
	n, err := r.TryReceive(t.Context(), buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// Guarantee: a message rejected on its first attempt is dead-lettered
// with the death metadata of every dead letter: reason rejected, the
// handler's error, its topic and group, no retry, and the time it failed
// as both its first and its last failure.
func TestARejectedMessageDiesWithItsFailureTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("invoices").Hold(time.Second).DLQ()))
		var failedAt time.Time
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			time.Sleep(time.Minute) // fake time: the failure comes a minute after the start
			failedAt = time.Now()
			return 0, topology.Reject(errors.New("unknown currency"))
		})
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err := pub.Publish(t.Context(), 7); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, time.Hour, "the dead letter", func() bool { return src.Stats().DeadLettered == 1 })
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		dl := deadLetters(t, q)
		if len(dl) != 1 || dl[0].Value != 7 || dl[0].Death == nil {
			t.Fatalf("DLQ holds %+v, want message 7 with its death", dl)
		}
		d := *dl[0].Death
		want := topology.Death{Reason: topology.ReasonRejected, Error: "unknown currency", Topic: "invoices", Group: "invoices",
			Retries: 0, FirstFailure: failedAt, LastFailure: failedAt}
		if !d.FirstFailure.Equal(failedAt) || !d.LastFailure.Equal(failedAt) {
			t.Errorf("death failure times first %v, last %v; want both %v, when the handler rejected it", d.FirstFailure, d.LastFailure, failedAt)
		}
		d.FirstFailure, d.LastFailure = want.FirstFailure, want.LastFailure
		if d != want {
			t.Errorf("death %+v, want %+v", d, want)
		}
	})
}

// Guarantee: a dead letter that a dead source's handler rejects is
// dropped (counted as discarded), not put back on the DLQ, where it would
// come round again for ever.
func TestARejectedDeadLetterLeavesTheDLQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("refunds").DLQ()))
		death := &topology.Death{Reason: topology.ReasonRejected, Error: "unknown account", Topic: "refunds", Group: "refunds"}
		if err := q.DeadLetter(t.Context(), topology.Letter[int]{Value: 7, Death: death}); err != nil {
			t.Fatal(err)
		}
		src, err := topology.NewDeadSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		var handled atomic.Int64
		// The first delivery is rejected; one more, were the letter put
		// back, would be taken.
		p := startPipelineOf(t, "refunds-dead", src, func(context.Context, *message.Message[int]) (int, error) {
			if handled.Add(1) == 1 {
				return 0, topology.Reject(errors.New("cannot refund"))
			}
			return 0, nil
		})
		synctest.Wait()
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st := src.Stats(); handled.Load() != 1 || st.Discarded != 1 || st.Acked != 0 || st.DeadLettered != 0 {
			t.Errorf("handled %d times, stats %+v; want once, 1 discarded and none put back", handled.Load(), st)
		}
		if dl := deadLetters(t, q); len(dl) != 0 {
			t.Errorf("the DLQ still holds %+v, want nothing", dl)
		}
	})
}
