package source_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: closing the source leaves the topic: its consumer group
// membership and broadcast subscription end.
func TestCloseLeavesTopic(t *testing.T) {
	for _, mode := range []topic.SubscriptionMode{topic.Balanced("g"), topic.Broadcast()} {
		o := topic.Options{Mode: topic.Mixed}
		h := newTopic(t, "t", o)
		src := newSource(t, h, mode)
		if st := h.Stats(); st.BalancedGroups+st.BroadcastSubscribers != 1 {
			t.Fatalf("%v: stats after New %+v, want one subscription", mode, st)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.BalancedGroups != 0 || st.BroadcastSubscribers != 0 {
			t.Fatalf("%v: stats after Close %+v, want no subscription left", mode, st)
		}
		h.Close()
	}
}
