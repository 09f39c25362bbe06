package topology

import (
	"context"
	"sync"
)

// pendingLetter is a letter and the reader it came from.
type pendingLetter[T any] struct {
	l Letter[T]
	r Reader[T]
}

type admission uint8

const (
	admitDeliver  admission = iota // hand it to the pipeline now
	admitHeldBack                  // a message of its key is in flight or held
	admitPoisoned                  // its key is poisoned: dead-letter it
)

// keyState is one key with a message in flight (or held for a retry).
type keyState[T any] struct {
	poisoned bool
	// cause is, once poisoned, the error of the message that poisoned
	// the key: the later messages' dead letters give it.
	cause string
	// draining is set while the messages held back when the key was
	// poisoned are being dead-lettered: later arrivals join them, so
	// that they reach the DLQ in order.
	draining bool
	waiting  []pendingLetter[T] // later messages of the key, in order
}

// sequencer keeps one message per key in flight. A key is in keys while
// one of its messages is in flight or held, and for the consumer's lifetime
// once poisoned.
type sequencer[T any] struct {
	policy SequenceFailure

	mu    sync.Mutex
	keys  map[string]*keyState[T]
	ready []pendingLetter[T] // released messages waiting for a permit
	held  int                // letters in waiting lists
	// drainedAll is set by drain: putBack then refuses.
	drainedAll bool
	wakers     map[*waker]struct{}
	free       []*keyState[T] // states of forgotten keys, for reuse
}

// newKey returns a state for a key that is not in keys.
func (q *sequencer[T]) newKey() *keyState[T] {
	if n := len(q.free); n > 0 {
		ks := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		return ks
	}
	return &keyState[T]{}
}

// forget removes an idle key, keeping its state for reuse.
func (q *sequencer[T]) forget(key string, ks *keyState[T]) {
	delete(q.keys, key)
	if len(q.free) < 1024 {
		ks.waiting = ks.waiting[:0]
		ks.cause = ""
		q.free = append(q.free, ks)
	}
}

// waker stops a Run waiting on its reader when letters become ready (a
// later message of a key released, or a message put back).
type waker struct{ cancel context.CancelFunc }

func (q *sequencer[T]) admit(l Letter[T], r Reader[T]) admission {
	if l.Key == "" {
		return admitDeliver
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	ks := q.keys[l.Key]
	switch {
	case ks == nil:
		q.keys[l.Key] = q.newKey()
		return admitDeliver
	case ks.poisoned && !ks.draining:
		return admitPoisoned
	case ks.poisoned:
		ks.waiting = append(ks.waiting, pendingLetter[T]{l: l, r: r})
		q.held++
		return admitHeldBack
	case l.Resume:
		// Back from a hold queue: it still holds its key.
		return admitDeliver
	}
	ks.waiting = append(ks.waiting, pendingLetter[T]{l: l, r: r})
	q.held++
	return admitHeldBack
}

// release ends the turn of key's message in flight: the next one waiting
// becomes ready, or the key is forgotten.
func (q *sequencer[T]) release(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ks := q.keys[key]
	if ks == nil || ks.poisoned {
		return
	}
	if len(ks.waiting) == 0 {
		q.forget(key, ks)
		return
	}
	next := ks.waiting[0]
	ks.waiting[0] = pendingLetter[T]{}
	ks.waiting = ks.waiting[1:]
	q.held--
	q.ready = append(q.ready, next)
	q.wakeLocked()
}

// wakeLocked stops the waits of the runs watching for ready letters.
func (q *sequencer[T]) wakeLocked() {
	for w := range q.wakers {
		w.cancel()
	}
}

// putBack makes p, the message of its key in flight, ready to be
// delivered again: its key stays taken, so the later messages of the key
// keep waiting behind it, a running source delivers it again (its run is
// woken), and drain returns it ahead of them. It returns false, keeping
// nothing, once drain was called: the caller must then give p back itself.
func (q *sequencer[T]) putBack(p pendingLetter[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.drainedAll {
		return false
	}
	if q.keys[p.l.Key] == nil {
		q.keys[p.l.Key] = q.newKey()
	}
	q.ready = append(q.ready, p)
	q.wakeLocked()
	return true
}

// poison marks key poisoned by a message that failed with cause, and
// returns the messages of it held back. The key is draining until drained
// returns nil: messages of it that arrive meanwhile are held back too, for
// the caller to dead-letter after these.
func (q *sequencer[T]) poison(key, cause string) []pendingLetter[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	ks := q.keys[key]
	if ks == nil {
		ks = q.newKey()
		q.keys[key] = ks
	}
	ks.poisoned, ks.draining, ks.cause = true, true, cause
	out := ks.waiting
	ks.waiting = nil
	q.held -= len(out)
	return out
}

// drained returns the messages of poisoned key held back since the last
// poison or drained call; when there are none it ends the draining, and
// later messages of the key are dead-lettered as they arrive.
func (q *sequencer[T]) drained(key string) []pendingLetter[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	ks := q.keys[key]
	if ks == nil {
		return nil
	}
	out := ks.waiting
	ks.waiting = nil
	q.held -= len(out)
	if len(out) == 0 {
		ks.draining = false
	}
	return out
}

// takeReady moves up to max ready letters to out.
func (q *sequencer[T]) takeReady(out []pendingLetter[T], max int) []pendingLetter[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(max, len(q.ready))
	out = append(out, q.ready[:n]...)
	rest := copy(q.ready, q.ready[n:])
	clear(q.ready[rest:])
	q.ready = q.ready[:rest]
	return out
}

// watch returns a context, derived from ctx, that the sequencer cancels
// (through w) as soon as a letter becomes ready: a run waits on its reader
// with it, and calls watch again once it was cancelled so. A letter that
// becomes ready between the run's last takeReady and its wait cancels it
// all the same, so the wait ends at once.
func (q *sequencer[T]) watch(ctx context.Context, w *waker) context.Context {
	wctx, cancel := context.WithCancel(ctx)
	q.mu.Lock()
	w.cancel = cancel
	q.wakers[w] = struct{}{}
	q.mu.Unlock()
	return wctx
}

// unwatch forgets w and ends its context.
func (q *sequencer[T]) unwatch(w *waker) {
	q.mu.Lock()
	delete(q.wakers, w)
	cancel := w.cancel
	q.mu.Unlock()
	cancel()
}

func (q *sequencer[T]) heldBack() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held + len(q.ready)
}

// drain removes and returns every letter the sequencer holds (ready ones
// first, then each key's waiting ones in order) and forgets every key that
// is not poisoned.
func (q *sequencer[T]) drain() []pendingLetter[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drainedAll = true
	out := q.ready
	q.ready = nil
	for k, ks := range q.keys {
		out = append(out, ks.waiting...)
		ks.waiting = nil
		if !ks.poisoned {
			q.forget(k, ks)
		}
	}
	q.held = 0
	return out
}

// cause returns the error of the message that poisoned key.
func (q *sequencer[T]) cause(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ks := q.keys[key]; ks != nil {
		return ks.cause
	}
	return ""
}
