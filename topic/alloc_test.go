package topic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// A message published and received one at a time on the in-memory backend
// allocates nothing once the subscription is warm, on a balanced and on a
// broadcast subscription alike.
func TestPublishAndReceiveAllocateNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		opts topic.Options
		mode topic.SubscriptionMode
	}{
		{"balanced", topic.Options{}, topic.Balanced("g")},
		{"broadcast", topic.Options{Mode: topic.BroadcastOnly}, topic.Broadcast()},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newIntTopic(t, c.opts)
			sub := subscribeInt(t, h, c.mode)
			ctx := testCtx(t)
			hop := func() {
				if err := h.Publish(ctx, 1); err != nil {
					t.Fatal(err)
				}
				if _, err := sub.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 { // warm the subscription's state
				hop()
			}
			if allocs := testing.AllocsPerRun(1000, hop); allocs != 0 {
				t.Fatalf("%.2f allocations per publish and receive, want 0", allocs)
			}
		})
	}
}
