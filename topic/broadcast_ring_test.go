package topic_test

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

func broadcastTopic(t *testing.T, capacity int, onLag topic.OnLag, tracked bool) *topic.Handle[int] {
	t.Helper()
	opts := topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: capacity, OnLag: onLag}}
	if tracked {
		opts.AckPropagation.Mode = topic.PropagationAuto
	}
	return newIntTopic(t, opts)
}

func receiveValue(t *testing.T, s *topic.Subscription[int], want int) topic.Item[int] {
	t.Helper()
	it, err := s.Receive(t.Context())
	if err != nil || it.Lagged != 0 || it.Value != want {
		t.Fatalf("Receive = %+v, %v; want value %d", it, err, want)
	}
	return it
}

// Guarantee: under on_lag disconnect, the overwrite of the ring's oldest
// message disconnects only the subscribers that had not read it; one
// that read it has lost nothing and keeps receiving, and the one
// disconnected is told, in its final lag notice, every message it had
// not read (the whole ring).
func TestBroadcastDisconnectRemovesOnlyTheSubscribersThatLostAMessage(t *testing.T) {
	const capacity = 4
	h := broadcastTopic(t, capacity, topic.Disconnect, false)
	slow := subscribeInt(t, h, topic.Broadcast())
	edge := subscribeInt(t, h, topic.Broadcast())
	for i := range capacity {
		if err := h.Publish(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	receiveValue(t, edge, 0)
	// Overwrites message 0: slow never read it, edge did.
	if err := h.Publish(t.Context(), capacity); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= capacity; i++ {
		receiveValue(t, edge, i)
	}
	it, err := slow.Receive(t.Context())
	if err != nil || it.Lagged != capacity {
		t.Fatalf("disconnected subscriber's Receive = %+v, %v; want a final lag notice of %d", it, err, capacity)
	}
	if _, err := slow.Receive(t.Context()); !errors.Is(err, topic.ErrSubscriptionClosed) {
		t.Fatalf("Receive after the final lag notice = %v, want ErrSubscriptionClosed", err)
	}
	if st := h.Stats(); st.BroadcastSubscribers != 1 || st.Lagged != capacity {
		t.Fatalf("Stats = %+v, want 1 broadcast subscriber and %d lagged", st, capacity)
	}
}

// Guarantee: a tracked broadcast publish that every subscriber received
// is not nacked for lag when later publishes overwrite its place in the
// ring: the subscriber's ack, however late, settles it as Acked.
func TestBroadcastReceivedMessageIsNotNackedWhenTheRingOverwritesIt(t *testing.T) {
	for _, onLag := range []topic.OnLag{topic.DropOldest, topic.Disconnect} {
		t.Run(onLag.String(), func(t *testing.T) {
			h := broadcastTopic(t, 1, onLag, true)
			sub := subscribeInt(t, h, topic.Broadcast())
			p := newTracked(t, h, topic.TrackedOptions{})
			rc, err := p.Publish(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			it := receiveValue(t, sub, 0)
			// Overwrites the only slot, which the subscriber has read.
			if err := h.Publish(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			if res, ok := rc.Result(); ok {
				t.Fatalf("publish settled as %+v before its subscriber acked", res)
			}
			if err := sub.Ack(it.ID); err != nil {
				t.Fatalf("Ack = %v", err)
			}
			if res, ok := rc.Result(); !ok || res.Outcome != topic.Acked {
				t.Fatalf("Result = %+v, %v; want Acked", res, ok)
			}
			receiveValue(t, sub, 1)
		})
	}
}

// Guarantee: closing a subscription that was disconnected for lag
// discards its pending final lag notice: its Receive then returns
// ErrSubscriptionClosed, as for any closed subscription.
func TestBroadcastClosedDisconnectedSubscriptionReceivesNothing(t *testing.T) {
	h := broadcastTopic(t, 1, topic.Disconnect, false)
	sub := subscribeInt(t, h, topic.Broadcast())
	for i := range 2 { // the second overwrites the first, unread: sub is disconnected
		if err := h.Publish(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	sub.Close()
	if it, err := sub.Receive(t.Context()); !errors.Is(err, topic.ErrSubscriptionClosed) {
		t.Fatalf("Receive after Close = %+v, %v; want ErrSubscriptionClosed", it, err)
	}
}
