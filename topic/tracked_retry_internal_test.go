package topic

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: a callback ticket whose publish the in-memory backend
// retried (it waited for room in a group whose last member then left, and
// published again to no group) counts only the deliveries of the publish
// that happened, so it is recycled once settled like any other.
func TestRetriedPublishTicketIsRecycled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, member, p := trackedGroupOfOne(t, 1)
		if err := h.Publish(t.Context(), 0); err != nil { // fills the group
			t.Fatal(err)
		}
		results := make(chan Result, 1)
		published := make(chan error, 1)
		go func() {
			published <- p.PublishFunc(t.Context(), 1, func(r Result) { results <- r })
		}()
		synctest.Wait() // the publish waits for room in the group
		member.Close()  // the group goes away: the publish retries and reaches nobody
		if err := <-published; err != nil {
			t.Fatalf("PublishFunc = %v", err)
		}
		if r := <-results; r.Outcome != Nacked || !errors.Is(r.Reason, ErrNoSubscribers) {
			t.Fatalf("outcome = %+v, want Nacked with ErrNoSubscribers", r)
		}
		if free := recycled(p.core); free != 1 {
			t.Fatalf("%d recycled tickets after the settled retried publish, want 1", free)
		}
	})
}

// Guarantee: a callback ticket whose delivery was dropped (the group's
// last member left with it queued) is recycled once the publish is
// settled, like one acked.
func TestDroppedDeliveryTicketIsRecycled(t *testing.T) {
	_, member, p := trackedGroupOfOne(t, DefaultBalancedCapacity)
	results := make(chan Result, 1)
	if err := p.PublishFunc(t.Context(), 1, func(r Result) { results <- r }); err != nil {
		t.Fatal(err)
	}
	member.Close() // leaves the message queued, unreceived
	if r := <-results; r.Outcome != Nacked || !errors.Is(r.Reason, ErrDeliveryDropped) {
		t.Fatalf("outcome = %+v, want Nacked with ErrDeliveryDropped", r)
	}
	if free := recycled(p.core); free != 1 {
		t.Fatalf("%d recycled tickets after the settled dropped publish, want 1", free)
	}
}

// recycled is the number of tickets on c's free list.
func recycled(c *trackerCore) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nfree
}

// trackedGroupOfOne makes a balanced-only topic whose group, of the given
// capacity, has one member, and a tracked publisher of one publish in
// flight; both are closed at the end of the test.
func trackedGroupOfOne(t *testing.T, capacity int) (*Handle[int], *Subscription[int], *TrackedPublisher[int]) {
	t.Helper()
	h, err := NewTopic[int]("t", Options{Balanced: BalancedPolicy{Capacity: capacity}, AckPropagation: AckPropagation{Mode: PropagationAuto}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	member, err := h.Subscribe(t.Context(), Balanced("g"), SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Tracked(TrackedOptions{MaxInFlight: 1, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return h, member, p
}
