package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// parkReceivers starts n receivers on q, each with a buffer of size
// items, and waits until all of them wait; the items they take go to got.
// The caller closes q to end those still waiting.
func parkReceivers(t *testing.T, q *Queue[int], n, size int, got chan<- []int) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			buf := make([]int, size)
			if k, err := q.Receive(context.Background(), buf); err == nil {
				got <- buf[:k]
			}
		})
	}
	wait.For(t, "receivers to wait", func() bool { return recvWaiting(q) == n })
	return &wg
}

// startReceive starts a Receive into buf on q and waits until it is the
// waiting-th receiver waiting; its outcome comes on the channel returned.
func startReceive(t *testing.T, ctx context.Context, q *Queue[int], buf []int, waiting int) <-chan result {
	t.Helper()
	got := make(chan result, 1)
	go func() {
		n, err := q.Receive(ctx, buf)
		got <- result{n, err}
	}()
	wait.For(t, "the receiver to wait", func() bool { return recvWaiting(q) == waiting })
	return got
}

// wokenBy publishes items under the queue lock, so that no woken receiver
// has run yet, and returns how many receivers that woke.
func wokenBy(q *Queue[int], items []int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.putLocked(items)
	return q.recv.ahead
}

// Guarantee: items arriving wake only as many waiting receivers as it
// takes to receive them all, each counting as able to take len(buf) items,
// even when more may be woken ahead.
func TestArrivingItemsWakeOnlyTheReceiversNeededToTakeThem(t *testing.T) {
	for _, tc := range []struct {
		size, items, woken int
	}{
		{size: 1, items: 1, woken: 1},
		{size: 1, items: 2, woken: 2},
		{size: 4, items: 3, woken: 1},
		{size: 2, items: 3, woken: 2},
	} {
		t.Run(fmt.Sprintf("buf=%d/items=%d", tc.size, tc.items), func(t *testing.T) {
			const receivers = 4
			q := New[int](8)
			q.wakeAhead = receivers
			got := make(chan []int, receivers)
			wg := parkReceivers(t, q, receivers, tc.size, got)
			items := make([]int, tc.items)
			if woken := wokenBy(q, items); woken != tc.woken {
				t.Fatalf("%d items for receivers taking %d each woke %d receivers, want %d", tc.items, tc.size, woken, tc.woken)
			}
			received := 0
			for received < tc.items {
				received += len(<-got)
			}
			q.Close()
			wg.Wait()
			checkInvariant(t, q)
		})
	}
}

// Guarantee: a queue wakes at most GOMAXPROCS−1 receivers ahead (at least
// one), as GOMAXPROCS stood when it was made.
func TestReceiversWokenAheadFollowGOMAXPROCS(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	for _, tc := range []struct{ procs, ahead int }{{1, 1}, {2, 1}, {4, 3}} {
		runtime.GOMAXPROCS(tc.procs)
		q := New[int](8)
		runtime.GOMAXPROCS(prev)
		const receivers = 6
		got := make(chan []int, receivers)
		wg := parkReceivers(t, q, receivers, 1, got)
		if woken := wokenBy(q, make([]int, receivers)); woken != tc.ahead {
			t.Fatalf("a queue made with GOMAXPROCS %d woke %d receivers ahead for a burst of %d, want %d", tc.procs, woken, receivers, tc.ahead)
		}
		for range receivers {
			<-got
		}
		q.Close()
		wg.Wait()
	}
}

// Guarantee: room appearing wakes as many waiting publishers as it takes
// to fill it, and a goroutine waiting for room in WaitRoom counts as one
// of them, filling one slot: it does not hold back the publishers behind
// it until it runs.
func TestFreedRoomWakesThePublishersNeededToFillIt(t *testing.T) {
	ctx := context.Background()
	q := New[int](4)
	for v := range 4 {
		_ = q.Publish(ctx, v)
	}
	done := make(chan error, 3)
	go func() { done <- q.WaitRoom(ctx) }()
	wait.For(t, "WaitRoom to wait", func() bool { return pubWaiting(q) == 1 })
	for i := range 2 {
		go func() { done <- q.Publish(ctx, 10+i) }()
		wait.For(t, "publishers to wait", func() bool { return pubWaiting(q) == 2+i })
	}
	q.mu.Lock()
	q.takeLocked(make([]int, 2))
	woken := q.pub.ahead
	q.mu.Unlock()
	if woken != 2 {
		t.Fatalf("2 free slots woke %d of WaitRoom and two publishers waiting behind it, want 2", woken)
	}
	drainAll(t, q)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	checkInvariant(t, q)
}

// Guarantee: a receiver that stops waiting on its wake channel after it
// was chosen to take arriving items hands the wakeup on, so another
// waiting receiver takes them.
func TestReceiverWokenByWakeAfterItWasSignalledPassesTheWakeupOn(t *testing.T) {
	q := New[int](4)
	wake := make(chan struct{})
	first := make(chan bool, 1)
	go func() {
		_, woken, _ := q.ReceiveOrWake(context.Background(), make([]int, 1), nil, wake)
		first <- woken
	}()
	wait.For(t, "the first receiver to wait", func() bool { return recvWaiting(q) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	buf := make([]int, 1)
	second := startReceive(t, ctx, q, buf, 2)

	// The first receiver takes the wake, then waits for the lock held
	// here, while the item arriving signals it, the oldest waiter.
	q.mu.Lock()
	wake <- struct{}{}
	q.putLocked([]int{42})
	q.mu.Unlock()
	if !<-first {
		t.Fatal("the first receiver did not report its wake")
	}
	select {
	case r := <-second:
		if r.n != 1 || r.err != nil || buf[0] != 42 {
			t.Fatalf("second receiver = %v, %v; want [42], nil", buf[:r.n], r.err)
		}
	case <-time.After(wait.Deadline):
		t.Fatal("the item stayed queued: the wakeup the first receiver was given was lost")
	}
	checkInvariant(t, q)
}
