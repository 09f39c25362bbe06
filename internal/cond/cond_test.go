package cond_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/cond"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: a condition that already holds returns nil at once, even with
// the context done.
func TestWaitForAConditionThatHolds(t *testing.T) {
	var mu sync.Mutex
	var sig cond.Signal
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if err := sig.Wait(ctx, &mu, func() bool { return true }); err != nil {
		t.Fatalf("Wait = %v, want nil for a condition that holds", err)
	}
}

// Guarantee: Wait checks the condition again once after each Broadcast,
// keeps waiting while it does not hold, and returns once it holds, with the
// mutex held.
func TestWaitUntilCondition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sig cond.Signal
		n := 2
		checked := make(chan int, 10) // the n each check saw
		returned := make(chan error, 1)
		go func() {
			mu.Lock()
			err := sig.Wait(context.Background(), &mu, func() bool {
				checked <- n
				return n == 0
			})
			if err == nil && n != 0 {
				err = fmt.Errorf("returned with n = %d, before the condition held", n)
			}
			mu.Unlock() // panics if Wait returned without the mutex
			returned <- err
		}()
		for want := 2; want >= 0; want-- {
			synctest.Wait()
			if len(checked) != 1 {
				t.Fatalf("checked the condition %d times while n = %d, want once", len(checked), want)
			}
			if got := <-checked; got != want {
				t.Fatalf("checked n = %d, want %d", got, want)
			}
			if want > 0 {
				if len(returned) > 0 {
					t.Fatalf("Wait returned (%v) with n = %d", <-returned, want)
				}
				mu.Lock()
				n--
				sig.Broadcast()
				mu.Unlock()
			}
		}
		if err := <-returned; err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: one Broadcast wakes every goroutine waiting, not only the
// last one to wait.
func TestBroadcastWakesEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sig cond.Signal
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // releases a waiter left behind
		held := false
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				mu.Lock()
				errs <- sig.Wait(ctx, &mu, func() bool { return held })
				mu.Unlock()
			}()
		}
		synctest.Wait() // both wait
		mu.Lock()
		held = true
		sig.Broadcast()
		mu.Unlock()
		synctest.Wait()
		if len(errs) != 2 {
			t.Fatalf("%d of 2 waiters returned after the Broadcast", len(errs))
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Guarantee: Wait returns ctx.Err(), with the mutex held, when ctx ends
// before the condition holds.
func TestWaitContext(t *testing.T) {
	var mu sync.Mutex
	var sig cond.Signal
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	mu.Lock()
	err := sig.Wait(ctx, &mu, func() bool { return false })
	mu.Unlock()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the context's error", err)
	}
}
