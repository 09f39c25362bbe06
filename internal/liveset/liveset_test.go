package liveset_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Guarantee: Add registers a member until the owner closes, and refuses
// one after, so that the caller releases it; Remove takes members out.
func TestAddRefusesOnceClosedAndRemoveTakesOut(t *testing.T) {
	var (
		mu     sync.Mutex
		closed bool
	)
	live := map[int]struct{}{}
	if !liveset.Add(&mu, &closed, live, 1) || !liveset.Add(&mu, &closed, live, 2) || !liveset.Add(&mu, &closed, live, 3) {
		t.Fatal("Add refused a member of an open owner")
	}
	liveset.Remove(&mu, live, 1, 3)
	if _, ok := live[2]; len(live) != 1 || !ok {
		t.Fatalf("after Remove(1, 3): %v, want only 2", live)
	}
	if got := liveset.Close(&mu, &closed, live); !slices.Equal(got, []int{2}) {
		t.Fatalf("Close returned %v, want [2]", got)
	}
	if liveset.Add(&mu, &closed, live, 4) || len(live) != 0 {
		t.Fatalf("Add after Close registered the member: %v", live)
	}
	if !mu.TryLock() {
		t.Fatal("Add or Remove left the mutex locked")
	}
}

// Guarantee: Close marks the owner closed, returns every live member once
// and leaves the set empty, so a second Close returns nothing.
func TestCloseTakesEveryMemberOnce(t *testing.T) {
	var (
		mu     sync.Mutex
		closed bool
	)
	live := map[int]struct{}{1: {}, 2: {}, 3: {}}
	got := liveset.Close(&mu, &closed, live)
	slices.Sort(got)
	if !closed || !slices.Equal(got, []int{1, 2, 3}) || len(live) != 0 {
		t.Fatalf("closed %v, members %v, left %v; want true, [1 2 3], none", closed, got, live)
	}
	if again := liveset.Close(&mu, &closed, live); len(again) != 0 {
		t.Fatalf("second Close returned %v, want nothing", again)
	}
	if !mu.TryLock() {
		t.Fatal("Close left the mutex locked")
	}
}

// Guarantee: CloseEach releases every member at once (each release here
// returns only once all have started) and returns their errors joined,
// the first member's and the last one's alike.
func TestCloseEachReleasesAtOnceAndJoinsErrors(t *testing.T) {
	var started atomic.Int32
	failed := map[int]error{1: errors.New("member 1 failed"), 3: errors.New("member 3 failed")}
	err := liveset.CloseEach([]int{1, 2, 3}, func(m int) error {
		started.Add(1)
		wait.For(t, "every release started", func() bool { return started.Load() == 3 })
		return failed[m]
	})
	if !errors.Is(err, failed[1]) || !errors.Is(err, failed[3]) || started.Load() != 3 {
		t.Fatalf("CloseEach = %v after %d releases, want the errors of members 1 and 3 after 3", err, started.Load())
	}
	if err := liveset.CloseEach([]int{1, 2}, func(int) error { return nil }); err != nil {
		t.Fatalf("CloseEach with no failure = %v", err)
	}
}

// Guarantee: a Closing runs its closing once, however often and from
// however many goroutines it is started, and every caller gets the same
// channel, closed once the closing has returned.
func TestClosingRunsOnceAndEveryCallerWaitsForIt(t *testing.T) {
	var c liveset.Closing
	var runs atomic.Int32
	release := make(chan struct{})
	f := func() {
		runs.Add(1)
		<-release
	}
	dones := make([]<-chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range dones {
		wg.Go(func() { dones[i] = c.Start(f) })
	}
	wg.Wait()
	for _, d := range dones {
		select {
		case <-d:
			t.Fatal("a closing's channel closed before the closing returned")
		default:
		}
		if d != dones[0] {
			t.Fatal("callers of Start got different channels")
		}
	}
	close(release)
	<-dones[0]
	if n := runs.Load(); n != 1 {
		t.Fatalf("the closing ran %d times, want once", n)
	}
}

// Guarantee: Await returns nil once the closing is done, even with a
// context already done, and otherwise returns ctx's error when ctx ends
// first, after calling cut once, so that the closing gives up what it
// waits for.
func TestAwaitReturnsAtTheDeadlineAndCuts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		close(done)
		expired, cancel := context.WithCancel(t.Context())
		cancel()
		cuts := 0
		// Both are ready: a choice left to chance would show within a
		// hundred calls.
		for range 100 {
			if err := liveset.Await(expired, done, func() { cuts++ }); err != nil || cuts != 0 {
				t.Fatalf("Await on a finished closing = %v with %d cuts, want nil and none", err, cuts)
			}
		}

		pending := make(chan struct{})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		err := liveset.Await(ctx, pending, func() { cuts++ })
		if !errors.Is(err, context.DeadlineExceeded) || cuts != 1 || time.Since(start) != time.Second {
			t.Fatalf("Await on a closing still running = %v after %v with %d cuts, want DeadlineExceeded after 1s and one cut",
				err, time.Since(start), cuts)
		}
		if err := liveset.Await(expired, pending, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("Await without cut = %v, want context.Canceled", err)
		}
	})
}

// Guarantee: Enter counts a call under way until the owner closes, and
// refuses one after, so that an owner waiting for its calls once closed
// waits for every call that started.
func TestEnterRefusesOnceClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			closed bool
			calls  sync.WaitGroup
		)
		if !liveset.Enter(&mu, &closed, &calls) {
			t.Fatal("Enter refused a call of an open owner")
		}
		mu.Lock()
		closed = true
		mu.Unlock()
		if liveset.Enter(&mu, &closed, &calls) {
			t.Fatal("Enter let a call start after the owner closed")
		}
		waited := make(chan struct{})
		go func() {
			calls.Wait()
			close(waited)
		}()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("the owner's wait ended while the call that entered still ran")
		default:
		}
		calls.Done()
		<-waited
		if !mu.TryLock() {
			t.Fatal("Enter left the mutex locked")
		}
	})
}

// Guarantee: Retiring closes every member queued, once each, on one
// closer at a time: the members queued while it closes a batch are
// closed in the next one, and Wait returns once all are closed, leaving
// no goroutine behind.
func TestRetiringClosesEveryMemberQueuedOnceOnOneCloser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var batches [][]int
		running := 0
		r := liveset.NewRetiring(func(ks []int) {
			mu.Lock()
			running++
			if running > 1 {
				t.Error("two closers run at once")
			}
			batches = append(batches, slices.Clone(ks))
			mu.Unlock()
			<-release
			mu.Lock()
			running--
			mu.Unlock()
		})
		r.Add(1)
		synctest.Wait() // the closer waits in close with [1]
		r.Add(2)
		r.Add(3)
		close(release)
		r.Wait()
		if want := [][]int{{1}, {2, 3}}; !slices.EqualFunc(batches, want, slices.Equal) {
			t.Fatalf("closed %v, want %v", batches, want)
		}
		r.Add(4) // a closer starts again after the last returned
		r.Wait()
		if n := len(batches); n != 3 || !slices.Equal(batches[2], []int{4}) {
			t.Fatalf("closed %v, want [4] closed by a new closer", batches)
		}
	})
}
