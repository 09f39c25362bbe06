package topic_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// closePanicsBackend is the in-memory backend whose subscriptions' Close
// closes them and then panics, as a backend written by a user may.
type closePanicsBackend struct{ topic.InMemory[int] }

func (b closePanicsBackend) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	st, err := b.InMemory.NewTopic(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return closePanicsState{st}, nil
}

type closePanicsState struct{ topic.State[int] }

func (s closePanicsState) Subscribe(ctx context.Context, mode topic.SubscriptionMode, o topic.SubscriberOptions) (topic.SubscriptionState[int], error) {
	st, err := s.State.Subscribe(ctx, mode, o)
	if err != nil {
		return nil, err
	}
	return closePanicsSub{st}, nil
}

type closePanicsSub struct{ topic.SubscriptionState[int] }

func (s closePanicsSub) Close() {
	s.SubscriptionState.Close()
	panic("backend close broke")
}

// Guarantee: a subscription whose backend's Close panics still resolves
// the tracked messages it received and had not settled as Nacked with
// ErrDeliveryDropped, at once, before the panic reaches Close's caller
// (as a backend's panic in Receive or Settle does), instead of leaving
// their publishes pending until they time out.
func TestASubscriptionWhoseBackendClosePanicsStillDropsItsPendingMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := topic.NewTopic[int]("t", topic.Options{}, closePanicsBackend{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		sub := subscribeInt(t, h, topic.Balanced("g"))
		p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Hour})
		rc, err := p.Publish(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sub.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
		if v := closeRecovering(sub); v != "backend close broke" {
			t.Fatalf("Close panicked with %v, want the backend's panic", v)
		}
		select {
		case <-rc.Done():
		default:
			t.Fatal("the publish received and not settled is still pending after Close")
		}
		if r, _ := rc.Result(); r.Outcome != topic.Nacked || !errors.Is(r.Reason, topic.ErrDeliveryDropped) {
			t.Fatalf("the publish settled as %v (%v), want Nacked with ErrDeliveryDropped", r.Outcome, r.Reason)
		}
	})
}

// closeRecovering closes s and returns what its Close panicked with.
func closeRecovering(s *topic.Subscription[int]) (v any) {
	defer func() { v = recover() }()
	s.Close()
	return nil
}
