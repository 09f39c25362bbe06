package source_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// settledOf is the number of outcomes st shows settled on the topic, or
// refused by it.
func settledOf(st source.Stats) uint64 {
	return st.Acked + st.Nacked + st.NotTracked + st.SettleFailed
}

// Readings of a source's Stats taken while it receives and settles never
// show more outcomes than messages received, and no counter goes down.
// The readings run on the one processor the test leaves the runtime, so
// that the scheduler's preemption, which may stop a reading at any point,
// lets the source receive and settle messages in the middle of one.
func TestASourceNeverShowsMoreOutcomesThanMessagesReceived(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 20000
	h := newTopic(t, "t", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 64}})
	src := newSource(t, h, topic.Balanced("b"))
	downstream(t, "b", src, 1, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
	published := make(chan error, 1)
	go func() {
		for i := range n {
			if err := h.Publish(t.Context(), i); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	var last source.Stats
	for settledOf(last) < n {
		st := src.Stats()
		if settled := settledOf(st); settled > st.Received {
			t.Fatalf("stats %+v show %d outcomes for %d messages received", st, settled, st.Received)
		}
		if st.Received < last.Received || settledOf(st) < settledOf(last) {
			t.Fatalf("counters went down: %+v after %+v", st, last)
		}
		last = st
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
}
