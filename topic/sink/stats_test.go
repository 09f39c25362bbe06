package sink_test

import (
	"context"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// checkOutcomesWithinPublished fails t when st shows more outcomes
// reported upstream than messages published.
func checkOutcomesWithinPublished(t *testing.T, when string, st sink.Stats) {
	t.Helper()
	if st.Acked+st.Failed > st.Published {
		t.Errorf("%s: stats %+v show %d outcomes for %d messages published", when, st, st.Acked+st.Failed, st.Published)
	}
}

// A tracked publish whose outcome is known at once (no subscriber) is
// counted published by the time its outcome is reported upstream: a
// reading taken from the upstream acknowledger never shows more outcomes
// than publishes, and the counters never go down.
func TestASinkNeverShowsMoreOutcomesThanPublishes(t *testing.T) {
	o := autoOpts(0)
	o.Mode = topic.BroadcastOnly
	_, _, s := rig(t, o, topic.Block, topic.SubscriptionMode{})
	var (
		mu   sync.Mutex
		last sink.Stats
	)
	ack := acker.Func(func(context.Context, []acker.Outcome, []acker.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		st := s.Stats()
		checkOutcomesWithinPublished(t, "as the outcome is reported", st)
		if st.Published < last.Published || st.Failed < last.Failed {
			t.Errorf("counters went down: %+v after %+v", st, last)
		}
		last = st
	})
	upstream := &ack
	for i := range 3 {
		if err := s.Publish(ctxT(t), message.New(i, upstream, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	checkOutcomesWithinPublished(t, "once every outcome is reported", st)
	if st.Published != 3 || st.Failed != 3 || st.InFlight != 0 {
		t.Fatalf("stats %+v once every publish reached no subscriber, want 3 published, 3 failed, none in flight", st)
	}
}
