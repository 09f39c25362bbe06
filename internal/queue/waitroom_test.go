package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// WaitRoom returns at once when there is room, returns when a receive makes
// room, reports a close and a done context, reserves nothing, and does not
// swallow the wakeup of a publisher waiting beside it.
func TestQueueWaitRoom(t *testing.T) {
	ctx := context.Background()
	q := New[int](1)
	if err := q.WaitRoom(ctx); err != nil {
		t.Fatal(err)
	}
	if q.Len() != 0 {
		t.Fatal("WaitRoom reserved or added something")
	}
	_ = q.Publish(ctx, 1)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	if err := q.WaitRoom(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRoom on full queue with deadline = %v", err)
	}
	cancel()
	checkInvariant(t, q)

	roomDone := make(chan error, 1)
	go func() { roomDone <- q.WaitRoom(ctx) }()
	wait.For(t, "room waiter parked", func() bool { return listLen(q, &q.pub) == 1 })
	pubDone := make(chan error, 1)
	go func() { pubDone <- q.Publish(ctx, 2) }()
	wait.For(t, "publisher parked", func() bool { return listLen(q, &q.pub) == 2 })
	buf := make([]int, 1)
	if n, _ := q.Receive(ctx, buf); n != 1 || buf[0] != 1 {
		t.Fatalf("Receive = %d %v", n, buf)
	}
	if err := <-roomDone; err != nil {
		t.Fatal(err)
	}
	// The room waiter did not take the slot: the publisher gets it.
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Receive(ctx, buf); n != 1 || buf[0] != 2 {
		t.Fatalf("Receive = %d %v", n, buf)
	}
	checkInvariant(t, q)

	_ = q.Publish(ctx, 3)
	go func() { roomDone <- q.WaitRoom(ctx) }()
	wait.For(t, "room waiter parked", func() bool { return listLen(q, &q.pub) == 1 })
	q.Close()
	if err := <-roomDone; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitRoom after Close = %v", err)
	}
}
