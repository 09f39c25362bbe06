package topic_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// closeHookBackend is the in-memory backend whose subscriptions' Close
// closes them and then calls after: one that panics, as a backend written
// by a user may, or one that waits.
type closeHookBackend struct {
	topic.InMemory[int]
	after func()
}

func (b closeHookBackend) NewTopic(ctx context.Context, name topic.Name, o topic.Options) (topic.State[int], error) {
	st, err := b.InMemory.NewTopic(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return closeHookState{st, b.after}, nil
}

type closeHookState struct {
	topic.State[int]
	after func()
}

func (s closeHookState) Subscribe(ctx context.Context, mode topic.SubscriptionMode, o topic.SubscriberOptions) (topic.SubscriptionState[int], error) {
	st, err := s.State.Subscribe(ctx, mode, o)
	if err != nil {
		return nil, err
	}
	return closeHookSub{st, s.after}, nil
}

type closeHookSub struct {
	topic.SubscriptionState[int]
	after func()
}

func (s closeHookSub) Close() {
	s.SubscriptionState.Close()
	s.after()
}

// Guarantee: a subscription whose backend's Close panics still resolves
// the tracked messages it received and had not settled as Nacked with
// ErrDeliveryDropped, at once, before the panic reaches Close's caller
// (as a backend's panic in Receive or Settle does), instead of leaving
// their publishes pending until they time out.
func TestASubscriptionWhoseBackendClosePanicsStillDropsItsPendingMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := topic.NewTopic[int]("t", topic.Options{}, closeHookBackend{after: func() { panic("backend close broke") }})
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

// Guarantee: a subscription's Close called while another is closing it
// returns only once that closing is done: the tracked messages it had
// received and not settled are then resolved as Nacked.
func TestASubscriptionCloseCalledDuringAnotherReturnsOnceItIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closing, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		defer unblock() // so that nothing is left blocked if the test fails
		h, err := topic.NewTopic[int]("t", topic.Options{}, closeHookBackend{after: func() {
			close(closing)
			<-release
		}})
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
		first, second := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(first)
			sub.Close()
		}()
		<-closing
		go func() {
			defer close(second)
			sub.Close()
		}()
		synctest.Wait()
		select {
		case <-second:
			t.Fatal("a Close called while another was closing the subscription returned before that closing was done")
		default:
		}
		unblock()
		<-first
		<-second
		select {
		case <-rc.Done():
		default:
			t.Fatal("the publish received and not settled is still pending once both Closes returned")
		}
	})
}

// Guarantee: a subscription's Acks, each from its own goroutine, and its
// Close, from another, may run at once: each tracked publish resolves,
// Acked when its Ack came first (which returns nil) and Nacked with
// ErrDeliveryDropped when Close came first (its Ack then returns
// ErrMessageNotTracked).
func TestAcksFromSeveralGoroutinesRacingCloseResolveEachPublishOnce(t *testing.T) {
	const n = 64
	h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Hour})
	rcs := make([]*topic.Receipt, n)
	for i := range rcs {
		if rcs[i], err = p.Publish(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]topic.MessageID, n)
	for range ids {
		it, err := sub.Receive(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ids[it.Value] = it.ID
	}
	acked := make([]error, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { acked[i] = sub.Ack(id) })
	}
	wg.Go(sub.Close)
	wg.Wait()
	for i, rc := range rcs {
		r, err := rc.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case acked[i] == nil && r.Outcome == topic.Acked:
		case errors.Is(acked[i], topic.ErrMessageNotTracked) && r.Outcome == topic.Nacked && errors.Is(r.Reason, topic.ErrDeliveryDropped):
		default:
			t.Errorf("message %d: Ack = %v, publish resolved as %v (%v); want nil and Acked, or ErrMessageNotTracked and Nacked with ErrDeliveryDropped", i, acked[i], r.Outcome, r.Reason)
		}
	}
}
