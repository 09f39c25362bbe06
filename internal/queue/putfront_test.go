package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// drainAll takes everything queued, without waiting.
func drainAll(t *testing.T, q *Queue[int]) []int {
	t.Helper()
	var got []int
	buf := make([]int, 3)
	for {
		n, err := q.TryReceive(buf)
		if err != nil && !errors.Is(err, ErrDrained) {
			t.Fatal(err)
		}
		if n == 0 {
			return got
		}
		got = append(got, buf[:n]...)
	}
}

// Guarantee: PutFront puts items back ahead of everything queued, in
// their order, wherever the ring's head stands (wrapped or not).
func TestPutFrontGoesAheadInOrder(t *testing.T) {
	ctx := context.Background()
	for shift := range 4 {
		q := New[int](6)
		// Move the ring's head to shift, so that the put-back items wrap
		// round its start for some shifts.
		for i := range shift {
			_ = q.Publish(ctx, -i)
		}
		for v := 10; v < 13; v++ {
			_ = q.Publish(ctx, v)
		}
		if shift > 0 {
			if n, _ := q.TryReceive(make([]int, shift)); n != shift {
				t.Fatalf("took %d, want %d", n, shift)
			}
		}
		if err := q.PutFront([]int{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		checkInvariant(t, q)
		if got := fmt.Sprint(drainAll(t, q)); got != "[1 2 3 10 11 12]" {
			t.Errorf("head at %d: received %s, want [1 2 3 10 11 12]", shift, got)
		}
	}
}

// Guarantee: PutFront never waits for room: on a full queue it goes over
// the capacity by the items put back, publishers wait until receivers have
// taken the queue back below its capacity, and the ring then shrinks back
// to it.
func TestPutFrontOverCapacityHoldsPublishersBack(t *testing.T) {
	ctx := context.Background()
	q := New[int](3)
	for v := 10; v < 13; v++ {
		_ = q.Publish(ctx, v)
	}
	if err := q.PutFront([]int{1, 2}); err != nil {
		t.Fatal(err)
	}
	if q.Len() != 5 || q.Cap() != 3 {
		t.Fatalf("Len, Cap = %d, %d after putting 2 back on a full queue of 3; want 5, 3", q.Len(), q.Cap())
	}
	if ok, err := q.TryPublish(99); ok || err != nil {
		t.Fatalf("TryPublish over capacity = %v, %v; want false, nil", ok, err)
	}
	published := make(chan error, 1)
	go func() { published <- q.Publish(ctx, 13) }()
	wait.For(t, "the publisher waiting", func() bool { return pubWaiting(q) == 1 })
	buf := make([]int, 2)
	if n, _ := q.TryReceive(buf); n != 2 || buf[0] != 1 || buf[1] != 2 {
		t.Fatalf("first receive = %v, want the 2 put back", buf[:n])
	}
	// Back at the capacity (3 queued): still no room.
	checkInvariant(t, q)
	if pubWaiting(q) != 1 {
		t.Fatal("a publisher went ahead while the queue held its capacity")
	}
	q.mu.Lock()
	slots := len(q.items)
	q.mu.Unlock()
	if slots != q.Cap() {
		t.Errorf("the ring holds %d slots after going back to the capacity, want %d", slots, q.Cap())
	}
	if n, _ := q.TryReceive(buf[:1]); n != 1 || buf[0] != 10 {
		t.Fatalf("second receive = %v, want 10", buf[:n])
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(drainAll(t, q)); got != "[11 12 13]" {
		t.Errorf("then received %s, want [11 12 13]", got)
	}
}

// Guarantee: PutFront wakes a receiver waiting on an empty queue, and a
// closed queue refuses it with ErrClosed, queueing nothing.
func TestPutFrontWakesReceiversAndRefusesWhenClosed(t *testing.T) {
	ctx := context.Background()
	q := New[int](2)
	buf := make([]int, 4)
	got := startReceive(t, ctx, q, buf, 1)
	if err := q.PutFront([]int{7, 8, 9}); err != nil {
		t.Fatal(err)
	}
	r := expectResult(t, got)
	if r.err != nil || fmt.Sprint(buf[:r.n]) != "[7 8 9]" {
		t.Fatalf("waiting receiver got %v, %v; want [7 8 9]", buf[:r.n], r.err)
	}
	if err := q.PutFront(nil); err != nil {
		t.Fatalf("PutFront(nil) = %v", err)
	}
	q.Close()
	if err := q.PutFront([]int{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutFront after Close = %v, want ErrClosed", err)
	}
	if q.Len() != 0 {
		t.Fatalf("a closed queue took %d items", q.Len())
	}
}

// holding returns a queue of capacity 4 holding 1 to k.
func holding(k int) *Queue[int] {
	q := New[int](4)
	for v := 1; v <= k; v++ {
		_ = q.Publish(context.Background(), v)
	}
	return q
}

// takeTwo takes the first two items of q into buf (of length 2) with
// ReceiveOrTake, failing t unless it takes both, and returns the take.
func takeTwo(t *testing.T, q *Queue[int], buf []int) uint64 {
	t.Helper()
	n, take, err := q.ReceiveOrTake(context.Background(), buf, nil)
	if n != 2 || err != nil {
		t.Fatalf("ReceiveOrTake = %d, %v; want 2, nil", n, err)
	}
	return take
}

// Guarantee: PutBack gives back what the latest receive that took items
// took, ahead of everything queued, as if it had never been taken; once
// another receive (TryReceive included) took items after it, PutBack
// refuses with ErrTakenSince and queues nothing, so no receiver gets an
// item after a later one; a closed queue refuses with ErrClosed.
func TestPutBackOnlyWhileNothingWasTakenSince(t *testing.T) {
	ctx := context.Background()
	q := holding(4)
	buf := make([]int, 2)
	take := takeTwo(t, q, buf)
	if err := q.PutBack(buf, take); err != nil {
		t.Fatalf("PutBack of the latest take = %v, want nil", err)
	}
	checkInvariant(t, q)

	// Taken again, then the next item is taken by another receive.
	n, take, err := q.ReceiveOrTake(ctx, buf[:1], nil)
	if n != 1 || err != nil || buf[0] != 1 {
		t.Fatalf("ReceiveOrTake = %v, %v; want [1], nil", buf[:n], err)
	}
	other := make([]int, 1)
	if k, _ := q.TryReceive(other); k != 1 || other[0] != 2 {
		t.Fatalf("TryReceive = %v, want [2]", other[:k])
	}
	if err := q.PutBack(buf[:1], take); !errors.Is(err, ErrTakenSince) {
		t.Fatalf("PutBack after another receive took 2 = %v, want ErrTakenSince", err)
	}
	if got := fmt.Sprint(drainAll(t, q)); got != "[3 4]" {
		t.Fatalf("queue holds %s after a refused PutBack, want [3 4]", got)
	}

	_ = q.Publish(ctx, 5)
	n, take, _ = q.ReceiveOrTake(ctx, buf, nil)
	q.Close()
	if err := q.PutBack(buf[:n], take); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutBack on a closed queue = %v, want ErrClosed", err)
	}
	if q.Len() != 0 {
		t.Fatalf("a closed queue took %d items back", q.Len())
	}
}

// Guarantee: PutBackDraining gives back the latest take as PutBack does,
// and on a closed queue too: the receivers still draining it receive the
// items given back, in order, before ErrDrained. It refuses with
// ErrTakenSince as PutBack does, open or closed.
func TestPutBackDrainingGivesBackToAClosedQueue(t *testing.T) {
	q := holding(3)
	buf := make([]int, 2)
	take := takeTwo(t, q, buf)
	q.Close()
	if err := q.PutBackDraining(buf, take); err != nil {
		t.Fatalf("PutBackDraining of the latest take on a closed queue = %v, want nil", err)
	}
	checkInvariant(t, q)
	if got := fmt.Sprint(drainAll(t, q)); got != "[1 2 3]" {
		t.Fatalf("a closed queue drains %s after PutBackDraining, want [1 2 3]", got)
	}
	if _, err := q.TryReceive(buf); !errors.Is(err, ErrDrained) {
		t.Fatalf("TryReceive once drained = %v, want ErrDrained", err)
	}

	q = holding(2)
	n, take, _ := q.ReceiveOrTake(context.Background(), buf[:1], nil)
	q.Close()
	if k, _ := q.TryReceive(buf[1:]); k != 1 {
		t.Fatalf("TryReceive of a closed queue = %d items, want 1", k)
	}
	if err := q.PutBackDraining(buf[:n], take); !errors.Is(err, ErrTakenSince) {
		t.Fatalf("PutBackDraining after another receive took 2 = %v, want ErrTakenSince", err)
	}
	if q.Len() != 0 {
		t.Fatalf("a refused PutBackDraining queued %d items", q.Len())
	}
}
