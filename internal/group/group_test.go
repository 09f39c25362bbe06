package group_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/group"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: Wait returns only once every goroutine started with Go has
// returned, including one started by another member of the group.
func TestWaitAwaitsEveryGoroutine(t *testing.T) {
	synctest.Test(t, waitAwaitsEveryGoroutine)
}

func waitAwaitsEveryGoroutine(t *testing.T) {
	var g group.Group
	var done atomic.Int32
	release := make(chan struct{})
	for range 8 {
		g.Go(func() {
			<-release
			done.Add(1)
		})
	}
	g.Go(func() {
		g.Go(func() { done.Add(1) })
		<-release
		done.Add(1)
	})
	waited := make(chan struct{})
	go func() {
		g.Wait()
		close(waited)
	}()
	synctest.Wait() // every goroutine has run as far as it can
	select {
	case <-waited:
		t.Fatal("Wait returned while goroutines were blocked")
	default:
	}
	close(release)
	<-waited
	if n := done.Load(); n != 10 {
		t.Fatalf("Wait returned after %d of 10 goroutines", n)
	}
}

// Guarantee: the zero Group with nothing started does not block.
func TestWaitEmpty(t *testing.T) {
	var g group.Group
	g.Wait()
}
