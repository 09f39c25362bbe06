package group

import (
	"context"
	"sync"
)

// Background is a set of goroutines that may start at any time, even
// while someone waits for the set to empty, unlike Group (and
// sync.WaitGroup, whose Add must not race with a Wait at zero): a source's
// calls that outlive the Run that began them, which its Close waits for
// within a context while a late Run may still start more. The zero value
// is ready to use. A Background must not be copied after first use.
type Background struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil until someone waits
}

// closed is a channel that is always closed.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Go runs f in a new goroutine of the set.
func (b *Background) Go(f func()) {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	go func() {
		defer b.done()
		f()
	}()
}

func (b *Background) done() {
	b.mu.Lock()
	b.n--
	if b.n == 0 && b.idle != nil {
		close(b.idle)
		b.idle = nil
	}
	b.mu.Unlock()
}

// Idle returns a channel closed once no goroutine of the set runs: at
// once if none runs now, else when the last of those running (and of those
// started meanwhile) returns.
func (b *Background) Idle() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return closed
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	return b.idle
}

// Wait waits until no goroutine of the set runs, or ctx ends: it then
// returns ctx.Err() and leaves them running (a later Wait waits again).
func (b *Background) Wait(ctx context.Context) error {
	select {
	case <-b.Idle():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
