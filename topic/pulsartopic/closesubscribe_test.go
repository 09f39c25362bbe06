package pulsartopic_test

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a Subscribe racing the backend's Close (called once, each
// round, a few more consumers or producers are open on the broker, so that
// the subscribes are further under way), balanced or broadcast, either
// subscribes, and the subscription then reports topic.ErrSubscriptionClosed
// once Close has returned, or fails with topic.ErrTopicClosed; Close
// returns nil with no consumer nor producer of the backend left open, and
// none panics nor races.
func TestSubscribesRacingTheBackendsCloseSubscribeOrReturnErrTopicClosed(t *testing.T) {
	b := testbroker.Pulsar(t)
	modes := []topic.SubscriptionMode{topic.Balanced("g"), topic.Balanced("h"), topic.Broadcast(), topic.Broadcast()}
	for round := range len(modes) + 1 {
		be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
		h := newHandle(t, be, "subscribing", topic.Options{Mode: topic.Mixed})
		type result struct {
			s   *topic.Subscription[int]
			err error
		}
		calls := make([]func() result, len(modes))
		for i, mode := range modes {
			calls[i] = func() result { s, err := h.Subscribe(ctxT(t), mode, topic.SubscriberOptions{}); return result{s, err} }
		}
		results := testbroker.RacePulsarClose(t, b, round, calls, func() error { return be.Close(context.Background()) })
		refused := 0
		for _, res := range results {
			if res.err != nil {
				refused++
				if !errors.Is(res.err, topic.ErrTopicClosed) {
					t.Fatalf("round %d: a Subscribe racing the backend's Close = %v, want nil or topic.ErrTopicClosed", round, res.err)
				}
				continue
			}
			if _, err := res.s.Receive(ctxT(t)); !errors.Is(err, topic.ErrSubscriptionClosed) {
				t.Fatalf("round %d: Receive of a subscription made while the backend closed = %v, want topic.ErrSubscriptionClosed", round, err)
			}
			res.s.Close()
		}
		t.Logf("round %d: %d of the %d subscribes refused", round, refused, len(calls))
		if _, err := h.Subscribe(ctxT(t), topic.Broadcast(), topic.SubscriberOptions{}); !errors.Is(err, topic.ErrTopicClosed) {
			t.Fatalf("round %d: Subscribe after the backend's Close = %v, want topic.ErrTopicClosed", round, err)
		}
	}
}
