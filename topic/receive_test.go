package topic_test

import (
	"runtime"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a ReceiveBatch buffer far longer than the topic's capacity
// costs memory by that capacity, not by the buffer's length.
func TestHugeReceiveBatchAllocatesByCapacity(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts topic.Options
		mode topic.SubscriptionMode
	}{
		{"balanced", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 4}}, topic.Balanced("g")},
		{"broadcast", topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: 4}}, topic.Broadcast()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newIntTopic(t, tc.opts)
			sub := subscribeInt(t, h, tc.mode)
			ctx := testCtx(t)
			for v := range 3 {
				if err := h.Publish(ctx, v); err != nil {
					t.Fatal(err)
				}
			}
			dst := make([]topic.Item[int], 1<<20)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			n, err := sub.ReceiveBatch(ctx, dst)
			runtime.ReadMemStats(&after)
			if err != nil || n != 3 {
				t.Fatalf("ReceiveBatch = %d, %v; want 3, nil", n, err)
			}
			for i, it := range dst[:n] {
				if it.Value != i {
					t.Fatalf("item %d has value %d, want %d", i, it.Value, i)
				}
			}
			// The buffer is 40 MiB; a receive sized by it allocates more
			// than that again.
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Fatalf("ReceiveBatch into %d items on a topic of capacity 4 allocated %d bytes, want under 1 MiB", len(dst), got)
			}
		})
	}
}
