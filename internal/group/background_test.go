package group_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/group"
)

// isClosed reports whether c is closed now.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Guarantee: Idle is closed at once for an empty set, and otherwise only
// once every goroutine of the set has returned, those started while
// someone already waited included.
func TestBackgroundIdleOnceEveryGoroutineReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		if !isClosed(b.Idle()) {
			t.Fatal("Idle of an empty set is not closed")
		}
		first, second := make(chan struct{}), make(chan struct{})
		b.Go(func() { <-first })
		idle := b.Idle()
		b.Go(func() { <-second })
		close(first)
		synctest.Wait()
		if isClosed(idle) {
			t.Fatal("Idle closed while a goroutine started after the wait began still runs")
		}
		close(second)
		synctest.Wait()
		if !isClosed(idle) {
			t.Fatal("Idle not closed once every goroutine returned")
		}
		if !isClosed(b.Idle()) {
			t.Fatal("Idle of the set emptied again is not closed")
		}
	})
}

// Guarantee: Wait returns ctx's error when ctx ends first, leaving the
// goroutines running, and a later Wait waits for them again.
func TestBackgroundWaitReturnsWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		release := make(chan struct{})
		b.Go(func() { <-release })
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with its context ended = %v, want context.Canceled", err)
		}
		close(release)
		if err := b.Wait(t.Context()); err != nil {
			t.Fatalf("Wait once the goroutine returned = %v", err)
		}
	})
}

// Guarantee: Go may be called at any time, while a Wait is under way and
// the set is empty included (where a sync.WaitGroup's Add must not race
// with its Wait): the race detector finds nothing, and every Wait returns
// once the goroutines it could see have returned.
func TestBackgroundGoMayRaceWithWait(t *testing.T) {
	var b group.Background
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				b.Go(func() {})
				if err := b.Wait(t.Context()); err != nil {
					t.Errorf("Wait = %v", err)
				}
			}
		})
	}
	wg.Wait()
	if err := b.Wait(t.Context()); err != nil {
		t.Fatalf("Wait at the end = %v", err)
	}
}

// Guarantee: a disowned goroutine no longer keeps the set busy: Wait
// returns while it still runs, and its later return (or a second Disown)
// does not count another goroutine of the set as done.
func TestBackgroundDisownedGoroutineIsNotWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		stuck, other := make(chan struct{}), make(chan struct{})
		task := b.Start(func() { <-stuck })
		b.Go(func() { <-other })
		task.Disown()
		task.Disown()
		synctest.Wait()
		if isClosed(b.Idle()) {
			t.Fatal("Idle closed while a goroutine that was not disowned still runs")
		}
		close(stuck) // the disowned goroutine returns: it must not count for the other
		synctest.Wait()
		if isClosed(b.Idle()) {
			t.Fatal("Idle closed when the disowned goroutine returned, with another still running")
		}
		close(other)
		if err := b.Wait(t.Context()); err != nil {
			t.Fatalf("Wait once the other goroutine returned = %v", err)
		}
		never := make(chan struct{})
		b.Start(func() { <-never }).Disown()
		if err := b.Wait(t.Context()); err != nil {
			t.Fatalf("Wait with only a disowned goroutine running = %v", err)
		}
		close(never)
	})
}

// Guarantee: Await returns the call's result when it comes in time; when
// its context ends first it returns ctx.Err() and the set keeps waiting
// for the call; when its timeout passes first it returns ErrAbandoned and
// the set no longer waits for it. Either way a successful result that
// comes later is discarded, and a failed one is not.
func TestAwaitReturnsTheResultOrLeavesTheCallBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		var discarded []int
		discard := func(v int) { discarded = append(discarded, v) }

		v, err := group.Await(t.Context(), &b, time.Second, func() (int, error) { return 1, nil }, discard)
		if v != 1 || err != nil {
			t.Fatalf("Await of a call that returns = %d, %v; want 1, nil", v, err)
		}

		release := make(chan struct{})
		ctx, cancel := context.WithCancel(t.Context())
		go func() { time.Sleep(time.Millisecond); cancel() }()
		if _, err := group.Await(ctx, &b, time.Hour, func() (int, error) { <-release; return 2, nil }, discard); !errors.Is(err, context.Canceled) {
			t.Fatalf("Await with its context cancelled = %v, want context.Canceled", err)
		}
		synctest.Wait()
		if isClosed(b.Idle()) {
			t.Fatal("the set stopped waiting for a call whose waiter's context ended")
		}
		close(release)
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}

		stuck := make(chan struct{})
		began := time.Now()
		if _, err := group.Await(t.Context(), &b, time.Second, func() (int, error) { <-stuck; return 3, nil }, discard); !errors.Is(err, group.ErrAbandoned) {
			t.Fatalf("Await of a call that does not return = %v, want ErrAbandoned", err)
		}
		if d := time.Since(began); d != time.Second {
			t.Errorf("Await abandoned the call after %v, want its timeout, 1s", d)
		}
		if err := b.Wait(t.Context()); err != nil {
			t.Fatalf("Wait with only an abandoned call running = %v", err)
		}
		close(stuck)

		failing := make(chan struct{})
		if _, err := group.Await(t.Context(), &b, time.Second, func() (int, error) { <-failing; return 4, errors.New("late failure") }, discard); !errors.Is(err, group.ErrAbandoned) {
			t.Fatalf("Await = %v, want ErrAbandoned", err)
		}
		close(failing)
		synctest.Wait()
		if want := []int{2, 3}; !slices.Equal(discarded, want) {
			t.Errorf("discarded %v, want the late successful results %v", discarded, want)
		}
	})
}

// Guarantee: a timeout of 0 or less means none: Await waits for the call
// however long it takes.
func TestAwaitWithoutATimeoutWaitsForTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		for _, timeout := range []time.Duration{0, -time.Second} {
			began := time.Now()
			v, err := group.Await(t.Context(), &b, timeout, func() (int, error) { time.Sleep(time.Hour); return 1, nil }, func(int) {})
			if v != 1 || err != nil || time.Since(began) != time.Hour {
				t.Fatalf("Await with a timeout of %v = %d, %v after %v; want 1, nil after the call's hour", timeout, v, err, time.Since(began))
			}
		}
	})
}

// Guarantee: a call Await left behind because its context ended is
// disowned once its timeout has passed since it began: the set waits for
// it until then, and no longer.
func TestAwaitDisownsACallItsWaiterLeftOnceItsTimeoutPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		stuck := make(chan struct{})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		began := time.Now()
		if _, err := group.Await(ctx, &b, time.Minute, func() (int, error) { <-stuck; return 1, nil }, func(int) {}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Await with its context's deadline first = %v, want context.DeadlineExceeded", err)
		}
		synctest.Wait()
		if isClosed(b.Idle()) {
			t.Fatal("the set stopped waiting for the call as soon as its waiter's context ended")
		}
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d != time.Minute {
			t.Errorf("the set waited %v for the call, want its timeout, 1m", d)
		}
		close(stuck)
	})
}

// Guarantee: once the set is shut, TryStart runs nothing and Await makes
// no call (ErrShut), while the goroutines already running are still
// waited for and Start still runs.
func TestAShutSetStartsNoCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		running := make(chan struct{})
		if b.TryStart(func() { <-running }) == nil {
			t.Fatal("TryStart refused before the set was shut")
		}
		b.Shut()
		ran := false
		if task := b.TryStart(func() { ran = true }); task != nil {
			t.Error("TryStart on a shut set returned a task")
		}
		if _, err := group.Await(t.Context(), &b, time.Second, func() (int, error) { ran = true; return 1, nil }, func(int) {}); !errors.Is(err, group.ErrShut) {
			t.Errorf("Await on a shut set = %v, want ErrShut", err)
		}
		synctest.Wait()
		if ran {
			t.Error("a call ran on a shut set")
		}
		if isClosed(b.Idle()) {
			t.Fatal("the shut set stopped waiting for the goroutine it ran before")
		}
		close(running)
		started := make(chan struct{})
		b.Start(func() { close(started) })
		<-started
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: a panic of the call Await waits for goes on in Await's
// caller, with the same value, and the set does not wait for the call's
// goroutine any longer.
func TestAwaitPanicsInItsCallerWithTheCallsPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		var got any
		func() {
			defer func() { got = recover() }()
			_, _ = group.Await(t.Context(), &b, time.Second, func() (int, error) { panic("the client panics") }, func(int) {})
		}()
		if got != "the client panics" {
			t.Errorf("Await's caller recovered %v, want the call's panic", got)
		}
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: Await whose context has already ended makes no call: it
// returns ctx.Err() and starts no goroutine, whatever the call would
// return.
func TestAwaitWithAnEndedContextMakesNoCall(t *testing.T) {
	var b group.Background
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 100 {
		calls := 0
		_, err := group.Await(ctx, &b, time.Second, func() (int, error) { calls++; return 1, nil }, func(int) {})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Await with its context ended = %v, want context.Canceled", err)
		}
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if calls != 0 {
			t.Fatalf("Await with its context ended made the call")
		}
	}
}

// Guarantee: a call that ends its goroutine (runtime.Goexit, as t.FailNow
// does) makes Await return ErrExited at once, without waiting for its
// timeout or its context, and the set does not wait for that goroutine.
func TestAwaitReturnsErrExitedAtOnceForACallThatEndsItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b group.Background
		began := time.Now()
		_, err := group.Await(t.Context(), &b, time.Hour, func() (int, error) { runtime.Goexit(); return 1, nil }, func(int) {})
		if !errors.Is(err, group.ErrExited) || time.Since(began) != 0 {
			t.Fatalf("Await = %v after %v, want ErrExited at once", err, time.Since(began))
		}
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
