package group_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

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
