package queue

import (
	"context"
	"testing"
)

// Guarantee: a queue reserves room for the items it holds, not for its
// capacity: one made with the largest capacity the options allow (2²⁰)
// and holding a few items has a ring of a few dozen slots, and it grows as
// items arrive.
func TestALargeCapacityIsReservedOnlyAsItemsArrive(t *testing.T) {
	q := New[int](1 << 20)
	if got := len(q.items); got > initialSlots {
		t.Fatalf("an empty queue of capacity 2²⁰ reserved %d slots, want at most %d", got, initialSlots)
	}
	for i := range 100 {
		if err := q.Publish(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(q.items); got < 100 || got > 2*initialSlots {
		t.Fatalf("a queue of capacity 2²⁰ holding 100 items has %d slots, want 100 to %d", got, 2*initialSlots)
	}
	expectReceived(t, q, 0, 100)
}

// Guarantee: a queue growing its ring keeps its items in order, even when
// they wrap around the ring's end, and grows to its capacity and no
// further: a full queue refuses the next item.
func TestAGrowingQueueKeepsItsOrderAndStopsAtItsCapacity(t *testing.T) {
	const capacity = 1000 // not a power of two: the last growth is cut short
	q := New[int](capacity)
	next, want := 0, 0
	// Wrap the head around the initial ring before it grows.
	for range 3 {
		for range initialSlots / 2 {
			if err := q.Publish(context.Background(), next); err != nil {
				t.Fatal(err)
			}
			next++
		}
		want = expectReceived(t, q, want, initialSlots/3)
	}
	// One item at a time, so that the ring doubles on its way to the
	// capacity, then a batch for the rest.
	for q.Len() < capacity-10 {
		if ok, err := q.TryPublish(next); !ok || err != nil {
			t.Fatalf("TryPublish with %d of %d items queued: %v, %v", q.Len(), capacity, ok, err)
		}
		next++
	}
	batch := make([]int, 20)
	for i := range batch {
		batch[i] = next + i
	}
	n, err := q.TryPublishBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	next += n
	if q.Len() != capacity {
		t.Fatalf("queue holds %d items after a batch filled it, want its capacity %d", q.Len(), capacity)
	}
	if ok, _ := q.TryPublish(-1); ok {
		t.Fatalf("a full queue of capacity %d took one more item", capacity)
	}
	if got := len(q.items); got != capacity {
		t.Fatalf("a full queue of capacity %d has %d slots, want %d", capacity, got, capacity)
	}
	expectReceived(t, q, want, next-want)
}

// Guarantee: a queue's ring doubles as it grows, so that a queue filled
// one item at a time copies its ring a logarithmic number of times, not
// once an item.
func TestAQueueFilledOneItemAtATimeDoublesItsRing(t *testing.T) {
	const items = 64 * initialSlots // six doublings from initialSlots
	q := New[int](1 << 20)
	resizes, slots := 0, len(q.items)
	for i := range items {
		if ok, err := q.TryPublish(i); !ok || err != nil {
			t.Fatalf("TryPublish with %d items queued: %v, %v", i, ok, err)
		}
		if len(q.items) != slots {
			resizes, slots = resizes+1, len(q.items)
		}
	}
	if resizes != 6 || slots != items {
		t.Fatalf("filling a queue with %d items one at a time resized its ring %d times to %d slots, want 6 doublings to %d", items, resizes, slots, items)
	}
	expectReceived(t, q, 0, items)
}

// expectReceived receives n items and checks they are from, from+1, …;
// it returns from+n.
func expectReceived(t *testing.T, q *Queue[int], from, n int) int {
	t.Helper()
	buf := make([]int, n)
	for got := 0; got < n; {
		k, err := q.TryReceive(buf[got:])
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			t.Fatalf("queue empty after %d of %d items", got, n)
		}
		got += k
	}
	for i, v := range buf {
		if v != from+i {
			t.Fatalf("item %d is %d, want %d", from+i, v, from+i)
		}
	}
	return from + n
}
