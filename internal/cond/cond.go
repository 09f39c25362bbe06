// Package cond is a condition that goroutines wait for under a mutex, with a
// context: the wait-until-idle loop of the producer stages (and of anything
// else that waits for a count to fall to zero) in one place.
package cond

import (
	"context"
	"sync"
)

// Signal wakes the goroutines waiting in Wait. The zero value is ready to
// use. Every method must be called with the mutex that guards the condition
// held, the same mutex each time.
type Signal struct {
	ch chan struct{} // made by the first waiter, closed by Broadcast
}

// Wait blocks until done() holds or ctx is done, and returns nil or
// ctx.Err(). mu must be held on entry and is held again on return; it is
// released while Wait blocks. done is called with mu held, after every
// Broadcast and once on entry.
func (s *Signal) Wait(ctx context.Context, mu sync.Locker, done func() bool) error {
	for !done() {
		if s.ch == nil {
			s.ch = make(chan struct{})
		}
		ch := s.ch
		mu.Unlock()
		select {
		case <-ch:
			mu.Lock()
		case <-ctx.Done():
			mu.Lock()
			return ctx.Err()
		}
	}
	return nil
}

// Broadcast wakes every goroutine waiting in Wait, which then checks its
// condition again. It costs nothing when nobody waits.
func (s *Signal) Broadcast() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
