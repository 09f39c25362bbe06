package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
)

// Guarantee: PutTail appends items after everything queued, in order,
// over the capacity when the queue is full and without waiting, wherever
// the ring's head stands; publishers wait until receivers have taken the
// queue back below its capacity, and a closed queue refuses with
// ErrClosed.
func TestPutTailGoesOverCapacityWithoutWaiting(t *testing.T) {
	ctx := context.Background()
	for shift := range 4 {
		q := New[int](4)
		for i := range shift { // move the ring's head
			_ = q.Publish(ctx, -i)
		}
		drainAll(t, q)
		for v := range 4 {
			_ = q.Publish(ctx, v)
		}
		for v := 10; v < 17; v++ {
			if err := q.PutTail([]int{v}); err != nil {
				t.Fatalf("shift %d: PutTail(%d) = %v", shift, v, err)
			}
		}
		if ok, err := q.TryPublish(99); ok || err != nil {
			t.Fatalf("shift %d: TryPublish over the capacity = %v, %v; want false, nil", shift, ok, err)
		}
		if got := fmt.Sprint(drainAll(t, q)); got != "[0 1 2 3 10 11 12 13 14 15 16]" {
			t.Fatalf("shift %d: received %s, want the queued items, then the ones put at the tail, in order", shift, got)
		}
		if ok, err := q.TryPublish(1); !ok || err != nil || len(q.items) != q.limit {
			t.Fatalf("shift %d: TryPublish once drained = %v, %v (ring of %d); want true, nil and a ring back to %d", shift, ok, err, len(q.items), q.limit)
		}
	}
	q := New[int](1)
	q.Close()
	if err := q.PutTail([]int{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutTail on a closed queue = %v, want ErrClosed", err)
	}
}

// Guarantee: a publisher waiting on a full queue does not overtake items
// put at the tail meanwhile: it is let in once receivers have taken the
// queue back below its capacity.
func TestPutTailKeepsWaitingPublishersBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[int](1)
		_ = q.Publish(t.Context(), 0)
		done := make(chan error, 1)
		go func() { done <- q.Publish(t.Context(), 2) }()
		synctest.Wait()
		if err := q.PutTail([]int{1}); err != nil {
			t.Fatal(err)
		}
		buf := make([]int, 1)
		var got []int
		for len(got) < 3 {
			n, err := q.Receive(t.Context(), buf)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[0 1 2]" {
			t.Fatalf("received %v, want [0 1 2]", got)
		}
	})
}

// Guarantee: items put at the tail of an empty queue wake a receiver
// waiting on it.
func TestPutTailWakesAWaitingReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[int](2)
		got := make(chan result, 1)
		buf := make([]int, 4)
		go func() {
			n, err := q.Receive(t.Context(), buf)
			got <- result{n, err}
		}()
		synctest.Wait()
		if err := q.PutTail([]int{7, 8}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case r := <-got:
			if r.err != nil || fmt.Sprint(buf[:r.n]) != "[7 8]" {
				t.Fatalf("waiting receiver got %v, %v; want [7 8]", buf[:r.n], r.err)
			}
		default:
			q.Close()
			<-got
			t.Fatal("a receiver waiting on an empty queue was not woken by PutTail")
		}
	})
}

// Guarantee: a run of PutTail calls over the capacity grows the ring by
// half at least each time it grows, so it copies the ring a logarithmic
// number of times, not once a call.
func TestPutTailGrowsTheRingGeometrically(t *testing.T) {
	q := New[int](4)
	for v := range 4 {
		_ = q.Publish(context.Background(), v)
	}
	const calls = 200
	grown := 0
	for v := range calls {
		size := len(q.items)
		if err := q.PutTail([]int{v}); err != nil {
			t.Fatal(err)
		}
		if len(q.items) != size {
			grown++
		}
	}
	// From 4 slots to 204 items, growing by half each time: 10 times.
	if grown > 10 {
		t.Fatalf("%d PutTail calls of one item grew the ring %d times, want at most 10", calls, grown)
	}
	if q.Len() != 4+calls {
		t.Fatalf("Len = %d, want %d", q.Len(), 4+calls)
	}
}
