package goexit_test

import (
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/topic/internal/goexit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: Resume goes on with body after each exit that exited
// accepts, hands exited the stack of the exit, and returns to its caller
// the goroutine that exited first ends only after the last call of body
// returned (its caller's deferred calls run after that).
func TestResumeGoesOnAfterEachExit(t *testing.T) {
	var steps, exits []int
	var stacks []string
	i := 0
	body := func() {
		for ; i < 5; i++ {
			steps = append(steps, i)
			if i == 1 || i == 3 {
				i++
				runtime.Goexit()
			}
		}
	}
	done := make(chan bool)
	go func() {
		returned := false
		defer func() { done <- returned }()
		goexit.Resume(body, func(stack string) bool {
			exits = append(exits, i)
			stacks = append(stacks, stack)
			return true
		})
		returned = true
	}()
	if <-done {
		t.Error("Resume returned to a caller whose goroutine body ended; want that goroutine to end once the work is done")
	}
	if len(steps) != 5 || len(exits) != 2 || exits[0] != 2 || exits[1] != 4 {
		t.Fatalf("steps %v, exits after %v; want 5 steps and exits after 2 and 4", steps, exits)
	}
	for _, s := range stacks {
		if !strings.Contains(s, "runtime.Goexit") {
			t.Fatalf("the stack handed to exited does not show the exit: %s", s)
		}
	}
}

// Guarantee: an exit that exited refuses ends the goroutine, and a panic
// in body goes on past Resume.
func TestResumeLetsARefusedExitAndAPanicThrough(t *testing.T) {
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		goexit.Resume(func() { calls++; runtime.Goexit() }, func(string) bool { return false })
		t.Error("Resume returned after an exit that exited refused")
	}()
	<-done
	if calls != 1 {
		t.Fatalf("body called %d times, want 1", calls)
	}
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the panic of body", r)
		}
	}()
	goexit.Resume(func() { panic("boom") }, func(string) bool { return false })
}
