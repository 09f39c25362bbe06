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
	shut bool          // TryStart starts nothing (see Shut)
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
// handle by which the goroutine can be disowned. It runs f even once the
// set is shut (see TryStart).
func (b *Background) Start(f func()) *Task {
	t := b.enter(false)
	t.run(f)
	return t
}

// TryStart is Start unless the set is shut (see Shut): it then runs
// nothing and returns nil.
func (b *Background) TryStart(f func()) *Task {
	t := b.enter(true)
	if t != nil {
		t.run(f)
	}
	return t
}

// Shut makes the set refuse the goroutines TryStart (and Await) would
// start from now on; those running go on, and Idle and Wait wait for
// them. An owner shuts the set of its calls as it begins closing, so that
// no call starts once its closing waits for them.
func (b *Background) Shut() {
	b.mu.Lock()
	b.shut = true
	b.mu.Unlock()
}

// enter counts one more goroutine, unless refuse is set and the set is
// shut: it then returns nil.
func (b *Background) enter(refuse bool) *Task {
	b.mu.Lock()
	defer b.mu.Unlock()
	if refuse && b.shut {
		return nil
	}
	b.n++
	return &Task{b: b}
}

func (t *Task) run(f func()) {
	go func() {
		defer t.leave()
		f()
	}()
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

// ErrExited is returned by Await, at once, for a call that ended its
// goroutine (runtime.Goexit, as t.FailNow does in a fake client) before
// returning.
var ErrExited = errors.New("call ended its goroutine (runtime.Goexit) before returning")

// ErrShut is returned by Await once its set is shut (see Shut): the call
// was not made.
var ErrShut = errors.New("call refused: its set is shut")

// Await runs call on a goroutine of b and waits for its result until ctx
// ends, when it returns ctx.Err(), or until timeout passes, when it
// returns ErrAbandoned: for a client library's call that may deadlock and
// cannot be cancelled. Once ctx has ended it makes no call and returns
// ctx.Err(); once the set is shut, ErrShut. A result that comes once
// Await has returned, with a nil error, is handed to discard (to close
// what it holds). The goroutine is disowned (see Task.Disown) once
// timeout has passed since the call began, whether Await still waited for
// it or its ctx had ended before: until then b's Wait waits for it, and
// never longer. A timeout of 0 or
// less means none. A panic of call goes on in Await's caller, with the
// same value, as if call had run there; once Await has returned, on
// call's goroutine. A call that ends its goroutine (runtime.Goexit) is an
// error: Await returns ErrExited.
func Await[T any](ctx context.Context, b *Background, timeout time.Duration, call func() (T, error), discard func(T)) (T, error) {
	type result struct {
		v        T
		err      error
		panicked bool
		p        any
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err // nobody waits for the call: it is not made
	}
	res := make(chan result)
	gone := make(chan struct{}) // closed when Await returned without the result
	expired := make(chan struct{})
	task := b.enter(true)
	if task == nil {
		return zero, ErrShut
	}
	var abandon *time.Timer
	if timeout > 0 {
		abandon = time.AfterFunc(timeout, func() {
			task.Disown()
			close(expired)
		})
	}
	task.run(func() {
		var r result
		exited := true
		// Deferred, so that a call that ends the goroutine
		// (runtime.Goexit) is answered too, with ErrExited.
		defer func() {
			if exited {
				r = result{err: ErrExited}
			}
			if abandon != nil {
				abandon.Stop()
			}
			select {
			case res <- r:
			case <-gone:
				if r.panicked {
					panic(r.p)
				}
				if r.err == nil {
					discard(r.v)
				}
			}
		}()
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.panicked, r.p = true, p
				}
			}()
			r.v, r.err = call()
		}()
		exited = false
	})
	select {
	case r := <-res:
		if r.panicked {
			panic(r.p)
		}
		return r.v, r.err
	case <-ctx.Done():
		close(gone)
		return zero, ctx.Err()
	case <-expired:
		close(gone)
		return zero, ErrAbandoned
	}
}
