// Package liveset keeps the set of live resources an owner holds (a
// source's Kafka group members or Pulsar consumers, a backend's readers),
// guarded by the owner's mutex beside its closed flag: once closed, the
// owner registers no new one, and the resources that were live are handed
// back to be released. Closing and Await let a Close bounded by a context
// return at its deadline while the closing it started goes on.
package liveset

import (
	"context"
	"errors"
	"sync"
)

// Add registers k in live under mu, unless the owner is closed (*closed):
// it then returns false, and the caller releases k itself.
func Add[K comparable](mu sync.Locker, closed *bool, live map[K]struct{}, k K) bool {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return false
	}
	live[k] = struct{}{}
	return true
}

// Enter registers one more call under way in calls, under mu, unless the
// owner is closed (*closed): it then returns false. The call ends with
// calls.Done(); the owner's closing waits for calls once it has marked
// itself closed, so no call starts after that wait begins.
func Enter(mu sync.Locker, closed *bool, calls *sync.WaitGroup) bool {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return false
	}
	calls.Add(1)
	return true
}

// Closed reports, under mu, whether the owner is closed (*closed).
func Closed(mu sync.Locker, closed *bool) bool {
	mu.Lock()
	defer mu.Unlock()
	return *closed
}

// Remove takes ks out of live under mu.
func Remove[K comparable](mu sync.Locker, live map[K]struct{}, ks ...K) {
	mu.Lock()
	defer mu.Unlock()
	for _, k := range ks {
		delete(live, k)
	}
}

// Close marks the owner closed (*closed = true) and returns the members of
// live, which it empties, both under mu. The caller releases what it
// returns after Close, without mu held.
func Close[K comparable](mu sync.Locker, closed *bool, live map[K]struct{}) []K {
	mu.Lock()
	defer mu.Unlock()
	*closed = true
	ks := make([]K, 0, len(live))
	for k := range live {
		ks = append(ks, k)
	}
	clear(live)
	return ks
}

// CloseEach calls release for every member of ms at once, each in its own
// goroutine, and returns their errors joined once every call has returned.
func CloseEach[K any](ms []K, release func(K) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		wg.Go(func() { errs[i] = release(m) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Closing runs an owner's closing once, on a goroutine of its own, so that
// a Close bounded by a context can stop waiting for it (Await) while it
// goes on, within the bounds of the calls it makes; whoever calls Close
// later, and an owner closing what it holds, wait for the same closing.
// The zero value is ready to use.
type Closing struct {
	once sync.Once
	done chan struct{}
}

// Start runs f on a new goroutine the first time it is called, and returns
// a channel closed once f has returned.
func (c *Closing) Start(f func()) <-chan struct{} {
	c.once.Do(func() {
		c.done = make(chan struct{})
		go func() {
			defer close(c.done)
			f()
		}()
	})
	return c.done
}

// Await waits for done until ctx ends. It returns nil once done is closed
// (even with ctx already done); when ctx ends first it calls cut, if not
// nil, so that the closing gives up what it still waits for, and returns
// ctx.Err().
func Await(ctx context.Context, done <-chan struct{}, cut func()) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		if cut != nil {
			cut()
		}
		return ctx.Err()
	}
}

// Retiring closes the members an owner retires (a replaced subscription
// once its messages are settled) on a goroutine of its own, the closer,
// so that neither what retires a member nor the settling of its last
// message waits for a closing that can wait on a broker. The closer
// starts with the first member queued while none runs, hands the members
// queued together to close at once, and returns once the queue is empty.
// An owner queues members under its own mutex while it is open, and its
// Close takes that mutex before Wait, so that no closer starts once Wait
// was called. Make it with NewRetiring.
type Retiring[K any] struct {
	close   func([]K)
	mu      sync.Mutex
	queue   []K
	running bool
	wg      sync.WaitGroup
}

// NewRetiring returns a Retiring whose closer closes members with close,
// which returns once those it is given are closed.
func NewRetiring[K any](close func([]K)) *Retiring[K] {
	return &Retiring[K]{close: close}
}

// Add queues k for the closer, starting one if none runs.
func (r *Retiring[K]) Add(k K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, k)
	if !r.running {
		r.running = true
		r.wg.Go(r.closer)
	}
}

// closer closes the queued members, those queued together at once, until
// the queue is empty.
func (r *Retiring[K]) closer() {
	for {
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		if len(batch) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.close(batch)
	}
}

// Wait returns once the closer, if one runs, has closed what was queued
// and returned.
func (r *Retiring[K]) Wait() { r.wg.Wait() }
