// Package wait is the tests' one way to wait for a condition: poll it,
// with a bound, instead of sleeping for a guessed time. On a busy machine
// the bound is generous; a condition that is never met fails the test with
// what was awaited and every goroutine's stack.
package wait

import (
	"runtime"
	"testing"
	"time"
)

// Deadline is how long For waits before it fails the test.
const Deadline = 15 * time.Second

// interval is the pause between two polls.
const interval = 200 * time.Microsecond

// For polls cond until it holds, failing t after Deadline with what was
// awaited, each state's description (read only then) and every
// goroutine's stack.
func For(t testing.TB, what string, cond func() bool, state ...func() string) {
	t.Helper()
	Within(t, Deadline, what, cond, state...)
}

// Within is For with another bound.
func Within(t testing.TB, bound time.Duration, what string, cond func() bool, state ...func() string) {
	t.Helper()
	end := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(end) {
			for _, s := range state {
				what += "; " + s()
			}
			buf := make([]byte, 1<<20)
			t.Fatalf("timed out after %v waiting for %s\n%s", bound, what, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(interval)
	}
}

// Stable polls sample until it returns the same value for quiet (what it
// observes stopped moving), failing t after bound with what was awaited
// and the last value.
func Stable(t testing.TB, bound, quiet time.Duration, what string, sample func() string) {
	t.Helper()
	end := time.Now().Add(bound)
	last, since := sample(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s (last %s)", bound, what, last)
			return
		}
		time.Sleep(20 * time.Millisecond)
		if v := sample(); v != last {
			last, since = v, time.Now()
		}
	}
}

// Together calls call from n goroutines released at once, and returns the
// channel their results arrive on, which holds all n.
func Together[R any](n int, call func() R) <-chan R {
	start := make(chan struct{})
	out := make(chan R, n)
	for range n {
		go func() {
			<-start
			out <- call()
		}()
	}
	close(start)
	return out
}
