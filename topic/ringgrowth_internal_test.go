package topic

import (
	"testing"
)

// Guarantee: the broadcast ring reserves slots for the messages its
// subscribers have not read, not for its capacity: a topic made with the
// largest capacity the options allow (2²⁰) starts with a few dozen slots,
// and passing messages to a subscriber that keeps up does not grow it.
func TestALargeBroadcastRingIsReservedOnlyAsSubscribersFallBehind(t *testing.T) {
	h, sub := subscribedBroadcast[[]byte](t, Options{Mode: BroadcastOnly, Broadcast: BroadcastPolicy{Capacity: MaxCapacity}})
	r := h.mem.ring
	if got := ringSlots(r); got > initialRingSlots {
		t.Fatalf("a new broadcast ring of capacity 2²⁰ has %d slots, want at most %d", got, initialRingSlots)
	}
	for i := range 1000 {
		if _, err := h.PublishWith(t.Context(), []byte{byte(i)}, Block); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := ringSlots(r); got > initialRingSlots {
		t.Fatalf("a broadcast ring whose subscriber keeps up has %d slots after 1000 messages, want at most %d", got, initialRingSlots)
	}
}

// Guarantee: a subscriber that falls behind a ring below its capacity
// loses nothing: the ring grows, keeping every message in order, until the
// subscriber is capacity messages behind, and only then is it told it
// lagged.
func TestABroadcastRingGrowsToItsCapacityBeforeASubscriberLags(t *testing.T) {
	const capacity = 1000 // not a power of two: the last growth is cut short
	h, sub := subscribedBroadcast[int](t, Options{Mode: BroadcastOnly, Broadcast: BroadcastPolicy{Capacity: capacity}})
	publish := func(from, to int) { publishInts(t, h, from, to) }
	receive := func(from, to int) {
		for i := from; i < to; i++ {
			e, err := sub.Receive(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if e.Lagged != 0 || e.Value != i {
				t.Fatalf("received value %d (lagged %d), want %d: a subscriber less than the capacity behind lost messages", e.Value, e.Lagged, i)
			}
		}
	}
	// Wrap the ring's head around before it grows.
	publish(0, 50)
	receive(0, 50)
	publish(50, 50+capacity)
	if got := ringSlots(h.mem.ring); got != capacity {
		t.Fatalf("a ring of capacity %d holding as many unread messages has %d slots, want %d", capacity, got, capacity)
	}
	receive(50, 60)
	publish(50+capacity, 70+capacity) // 10 more than the ring holds
	e, err := sub.Receive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e.Lagged != 10 {
		t.Fatalf("subscriber %d messages behind a ring of capacity %d: lagged %d, want 10", capacity+10, capacity, e.Lagged)
	}
	receive(70, 70+capacity)
}

func ringSlots[T any](r *ring[T]) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.slots)
}

// subscribedBroadcast makes a topic of opts with one broadcast subscriber,
// both closed when t ends.
func subscribedBroadcast[T any](t *testing.T, opts Options) (*Handle[T], *Subscription[T]) {
	t.Helper()
	h, err := NewTopic[T]("t", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	sub, err := h.Subscribe(t.Context(), Broadcast(), SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return h, sub
}

// Guarantee: one ReceiveBatch takes as many of a broadcast subscriber's
// unread messages as its buffer holds, up to the ring's capacity, however
// few slots the ring had when the subscriber subscribed.
func TestAReceiveBatchTakesWhatTheGrownRingHolds(t *testing.T) {
	const capacity, published = 1000, 500
	h, sub := subscribedBroadcast[int](t, Options{Mode: BroadcastOnly, Broadcast: BroadcastPolicy{Capacity: capacity}})
	publishInts(t, h, 0, published)
	dst := make([]Item[int], 2*capacity)
	n, err := sub.ReceiveBatch(t.Context(), dst)
	if err != nil {
		t.Fatal(err)
	}
	if n != published {
		t.Fatalf("ReceiveBatch with room for %d took %d of %d unread messages, want all of them", len(dst), n, published)
	}
	for i, it := range dst[:n] {
		if it.Value != i || it.Lagged != 0 {
			t.Fatalf("item %d = %d (lagged %d), want %d", i, it.Value, it.Lagged, i)
		}
	}
}

// Guarantee: a ring at its capacity overwrites its oldest message in
// place: a subscriber lagging behind a full ring does not make every
// publish copy the ring.
func TestAFullBroadcastRingOverwritesItsOldestMessageInPlace(t *testing.T) {
	const capacity, over = 100, 10
	h, sub := subscribedBroadcast[int](t, Options{Mode: BroadcastOnly, Broadcast: BroadcastPolicy{Capacity: capacity}})
	publish := func(from, to int) { publishInts(t, h, from, to) }
	publish(0, capacity)
	full := ringStorage(h.mem.ring)
	publish(capacity, capacity+over)
	if got := ringStorage(h.mem.ring); got != full {
		t.Fatalf("publishing %d messages to a full ring of capacity %d moved its slots (%p to %p), want them overwritten in place", over, capacity, full, got)
	}
	lag, err := sub.Receive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e, err := sub.Receive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if lag.Lagged != over || e.Lagged != 0 || e.Value != over {
		t.Fatalf("subscriber %d messages behind a ring of capacity %d: lag notice of %d, then %d (lagged %d); want a notice of %d, then %d", capacity+over, capacity, lag.Lagged, e.Value, e.Lagged, over, over)
	}
}

// ringStorage is the address of r's first slot, which changes when the
// ring copies itself into new slots.
func ringStorage[T any](r *ring[T]) *rslot[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &r.slots[0]
}

// publishInts publishes from, from+1, …, to-1 to h, waiting for room.
func publishInts(t *testing.T, h *Handle[int], from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := h.PublishWith(t.Context(), i, Block); err != nil {
			t.Fatal(err)
		}
	}
}
