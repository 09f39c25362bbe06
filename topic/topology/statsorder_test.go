package topology_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// outcomes is the number of letters of st with an outcome.
func outcomes(st topology.Stats) uint64 {
	return st.Acked + st.Retried + st.Deferred + st.Requeued + st.DeadLettered + st.Discarded
}

// Guarantee: readings of a source's Stats taken while it receives and
// settles never show more letters with an outcome (acked, retried,
// deferred, requeued, dead-lettered, discarded) than letters received,
// and none of these counters goes down. The readings run on the one
// processor the test leaves the runtime, so that the scheduler's
// preemption, which may stop a reading at any point, lets the source
// receive and settle in the middle of one.
func TestSourceStatsNeverShowMoreOutcomesThanLettersReceived(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 100000
	_, q := declareMemory(t, build(t, topology.New("order")))
	src, _ := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
	wait.Within(t, time.Minute, "the subscription", func() bool { return src.Stats().Subscriptions > 0 })
	pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
	published := make(chan error, 1)
	go func() {
		for i := range n {
			if err := pub.Publish(context.Background(), i); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	var last topology.Stats
	for last.Acked < n {
		st := src.Stats()
		if outcomes(st) > st.Received {
			t.Fatalf("a reading shows %d letters with an outcome of %d received: %+v", outcomes(st), st.Received, st)
		}
		if st.Received < last.Received || st.Acked < last.Acked || outcomes(st) < outcomes(last) {
			t.Fatalf("counters went down: %+v after %+v", st, last)
		}
		last = st
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
}
