// Package within runs a call that may panic or block, for tests that check
// a call returns an error instead.
package within

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Run runs f on its own goroutine and returns what it returned, or a panic
// as an error ("panic: …"), or an error saying it did not return within d.
func Run(d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic: %v", r)
			}
		}()
		done <- f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errors.New("did not return")
	}
}

// Call is a call a test makes, named as its failure reports it.
type Call struct {
	Name string
	F    func() error
}

// Refused runs each call, which gives its function a nil context, with
// [Run] and d, and fails t (t.Errorf) for every one that did not return an
// error matching want: one that panicked, blocked past d, returned nil or
// another error.
func Refused(t testing.TB, d time.Duration, want error, calls ...Call) {
	t.Helper()
	for _, c := range calls {
		if err := Run(d, c.F); !errors.Is(err, want) {
			t.Errorf("%s(nil ctx) = %v, want an error matching %q", c.Name, err, want)
		}
	}
}
