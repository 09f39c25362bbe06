// Package within runs a call that may panic or block, for tests that check
// a call returns an error instead.
package within

import (
	"errors"
	"fmt"
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
