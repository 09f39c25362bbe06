package cond_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/cond"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: Wait returns once the condition holds after a Broadcast, with
// the mutex held, and not before; a condition that already holds returns at
// once.
func TestWaitUntilCondition(t *testing.T) {
	var mu sync.Mutex
	var sig cond.Signal
	n := 3
	mu.Lock()
	if err := sig.Wait(context.Background(), &mu, func() bool { return n > 0 }); err != nil {
		t.Fatal(err)
	}
	mu.Unlock()

	returned := make(chan error, 1)
	entered := make(chan struct{})
	go func() {
		mu.Lock()
		first := true
		err := sig.Wait(context.Background(), &mu, func() bool {
			if first {
				// Called on entry, with mu held: once the test gets mu
				// after this, the waiter is parked.
				first = false
				close(entered)
			}
			return n == 0
		})
		if n != 0 {
			err = errors.New("returned before the condition held")
		}
		mu.Unlock() // panics if Wait returned without the mutex
		returned <- err
	}()
	<-entered
	for range 3 {
		mu.Lock()
		n--
		sig.Broadcast()
		mu.Unlock()
	}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return once the condition held")
	}
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
