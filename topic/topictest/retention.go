package topictest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"weak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// RunRetention checks that a backend's subscriptions keep none of the
// values they delivered once those are settled: for a balanced and a
// broadcast subscription (as the backend supports them), n values of 1 KiB
// are published, received (in batches) and acknowledged, then a last one is (a client
// may keep the last batch it fetched, which holds it), and every one of the
// first n values must then be unreachable. newBackend is called once per
// subtest, with a codec that gives back the bytes it decodes as they are,
// so a value shares its memory with what the backend read.
func RunRetention(t *testing.T, newBackend func(t *testing.T) topic.Backend[[]byte]) {
	const n, size = 300, 1 << 10
	for _, c := range []struct {
		name string
		o    topic.Options
		mode topic.SubscriptionMode
	}{
		{"balanced", topic.Options{Mode: topic.BalancedOnly}, topic.Balanced("retain")},
		{"broadcast", topic.Options{Mode: topic.BroadcastOnly}, topic.Broadcast()},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t)
			if !slices.Contains(b.Capabilities().Modes, c.o.Mode) {
				t.Skipf("the backend does not support %s topics", c.name)
			}
			h, err := topic.NewTopic("retain", c.o, b)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Close)
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			s, err := h.Subscribe(ctx, c.mode, topic.SubscriberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			ws := make([]weak.Pointer[byte], 0, n)
			items := make([]topic.Item[[]byte], 64)
			round := func(from, to int) {
				for i := from; i < to; i++ {
					if err := h.Publish(ctx, bytes.Repeat([]byte{byte(i)}, size)); err != nil {
						t.Fatal(err)
					}
				}
				for got := from; got < to; {
					k, err := s.ReceiveBatch(ctx, items)
					if err != nil {
						t.Fatal(err)
					}
					for _, it := range items[:k] {
						if it.Lagged != 0 || len(it.Value) != size {
							t.Fatalf("received %d bytes, %d lagged; want %d bytes", len(it.Value), it.Lagged, size)
						}
						if from == 0 {
							ws = append(ws, weak.Make(&it.Value[0]))
						}
						if err := s.Ack(it.ID); err != nil && !errors.Is(err, topic.ErrMessageNotTracked) {
							t.Fatal(err)
						}
					}
					clear(items)
					got += k
				}
			}
			round(0, n)
			round(n, n+1)
			if live := wait.Reachable(ws); live > 0 {
				t.Errorf("%d of %d values still reachable from the subscription after they were acknowledged", live, n)
			}
		})
	}
}
