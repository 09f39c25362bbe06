package group

import (
	"context"
	"errors"
	"sync"
	"time"
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
func (b *Background) Go(f func()) { b.Start(f) }

// Start runs f in a new goroutine of the set, as Go does, and returns a
// handle by which the goroutine can be disowned.
func (b *Background) Start(f func()) *Task {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	t := &Task{b: b}
	go func() {
		defer t.leave()
		f()
	}()
	return t
}

// Task is one goroutine of a Background, started by Start.
type Task struct {
	b    *Background
	once sync.Once
}

// Disown takes the goroutine out of the set, for a call that may never
// return (a client library's call that deadlocked): Idle and Wait stop
// waiting for it, and its return, if it comes, counts for nothing. The
// goroutine keeps running; whoever disowns it answers for what it holds.
// Disowning twice, or after the goroutine returned, does nothing.
func (t *Task) Disown() { t.leave() }

func (t *Task) leave() { t.once.Do(t.b.done) }

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

// ErrAbandoned is returned by Await for a call that did not return within
// its timeout.
var ErrAbandoned = errors.New("call abandoned: it did not return within its timeout")

// Await runs call on a goroutine of b and waits for its result until ctx
// ends, when it returns ctx.Err(), or until timeout passes, when it
// returns ErrAbandoned and disowns the goroutine (see Task.Disown): for a
// client library's call that may deadlock and cannot be cancelled. A
// result that comes once Await has returned, with a nil error, is handed
// to discard (to close what it holds). A goroutine left behind by an
// ended ctx stays in b, so that b's Wait waits for it; one abandoned does
// not. A timeout of 0 or less means none.
func Await[T any](ctx context.Context, b *Background, timeout time.Duration, call func() (T, error), discard func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	res := make(chan result)
	gone := make(chan struct{}) // closed when Await returned without the result
	task := b.Start(func() {
		v, err := call()
		select {
		case res <- result{v, err}:
		case <-gone:
			if err == nil {
				discard(v)
			}
		}
	})
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var zero T
	select {
	case r := <-res:
		return r.v, r.err
	case <-ctx.Done():
		close(gone)
		return zero, ctx.Err()
	case <-expired:
		close(gone)
		task.Disown()
		return zero, ErrAbandoned
	}
}
