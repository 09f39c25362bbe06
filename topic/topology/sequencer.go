package topology

import (
	"context"
	"slices"
	"sync"
	"time"
)

// pendingLetter is a letter and the reader it came from.
type pendingLetter[T any] struct {
	l Letter[T]
	r *heldReader[T]
}

type admission uint8

const (
	admitDeliver  admission = iota // hand it to the pipeline now
	admitHeldBack                  // a message of its key is in flight or held
	admitPoisoned                  // its key is poisoned: dead-letter it
	admitGiveBack                  // its reader let go of its shard: give it back
)

// keyState is one key with a message in flight (or held for a retry).
type keyState[T any] struct {
	poisoned bool
	// follow is, once poisoned, the death error of the key's later
	// messages (poisonedBy the error of the message that poisoned it,
	// bounded by BoundDeathError): what the key keeps is at most
	// MaxDeathErrorBytes, whatever the failure's size.
	follow string
	// draining is set while the messages held back when the key was
	// poisoned are being dead-lettered: later arrivals join them, so
	// that they reach the DLQ in order.
	draining bool
	// out is set while the key's message went to the backend to come
	// back marked Resume (a hold queue, a requeue, or a hand-off tried
	// again): only the source's reader can bring it back.
	out bool
	// outMark is the history of the message out (set with out): the
	// letter coming back with it is that message.
	outMark letterMark
	// moved is set while the reader no longer holds the key's shard
	// (ShardNotifier) and the key's message is in flight: should it go
	// out, it comes back to the shard's new owner, so the key is then
	// done with here rather than out. On a poisoned key it is set while
	// the key is draining: its poisoning is forgotten once the draining
	// ends (drained).
	moved bool
	// shard is the key's routing shard (Letter.Shard): an assignment
	// that leaves it out ends the key's retry, or its poisoning, here.
	shard   int
	waiting []pendingLetter[T] // later messages of the key, in order
}

// letterMark is what tells the letters of one key marked Resume apart:
// a letter's retry count and failure times, which a hold or a requeue
// leaves as they were when the source handed it off. (Letters that
// never failed and were only deferred or requeued share a mark.)
type letterMark struct {
	retries     int
	first, last time.Time
}

func markOf[T any](l *Letter[T]) letterMark {
	return letterMark{retries: l.Retries, first: l.FirstFailure, last: l.LastFailure}
}

// marked reports whether l carries mark m.
func marked[T any](m letterMark, l *Letter[T]) bool {
	return m.retries == l.Retries && m.first.Equal(l.FirstFailure) && m.last.Equal(l.LastFailure)
}

// sequencer keeps one message per key in flight. A key is in keys while
// one of its messages is in flight or held, and once poisoned for the
// consumer's lifetime, or until an assignment of its reader leaves the
// key's shard out (assigned).
type sequencer[T any] struct {
	policy SequenceFailure
	// shards is the topology's number of routing shards.
	shards int
	// limit is MaxHeldBack: the run takes no more letters than would
	// take held+len(ready) past it (see room).
	limit int

	mu    sync.Mutex
	keys  map[string]*keyState[T]
	ready []pendingLetter[T] // released messages waiting for a permit
	held  int                // letters in waiting lists
	// overdrawn is set while the run takes letters past limit, stalled
	// (see room), until the letters held back are below limit again.
	overdrawn bool
	// waitingKeys counts the keys with letters waiting, outKeys those
	// of them whose message is out in the backend (keyState.out).
	waitingKeys, outKeys int
	// poisoned counts the keys in keys that are poisoned.
	poisoned int
	// drainedAll is set by drain: putBack then refuses.
	drainedAll bool
	wakers     map[*waker]struct{}
	free       []*keyState[T] // states of forgotten keys, for reuse
}

// newKey returns a state for a key of shard that is not in keys.
func (q *sequencer[T]) newKey(shard int) *keyState[T] {
	if n := len(q.free); n > 0 {
		ks := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		ks.shard = shard
		return ks
	}
	return &keyState[T]{shard: shard}
}

// forget removes an idle key, or a poisoned one that is not draining,
// keeping its state for reuse.
func (q *sequencer[T]) forget(key string, ks *keyState[T]) {
	delete(q.keys, key)
	if ks.poisoned {
		q.poisoned--
	}
	if len(q.free) < 1024 {
		ks.waiting = ks.waiting[:0]
		ks.follow = ""
		ks.poisoned, ks.draining = false, false
		ks.out, ks.moved = false, false
		q.free = append(q.free, ks)
	}
}

// waker stops a Run waiting on its reader when letters become ready (a
// later message of a key released, or a message put back).
type waker struct{ cancel context.CancelFunc }

func (q *sequencer[T]) admit(l Letter[T], r *heldReader[T]) admission {
	if l.Key == "" {
		return admitDeliver
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if r != nil && r.letGo(&l) {
		// Taken from r as r let go of its part (or as an assignment
		// left its shard out), and admitted after: the part's letters
		// are its next owner's. Held back, it would keep r's release
		// waiting for it; delivered, it would go ahead of its key's
		// message out, which comes back there.
		return admitGiveBack
	}
	ks := q.keys[l.Key]
	switch {
	case ks == nil:
		q.keys[l.Key] = q.newKey(l.Shard)
		return admitDeliver
	case ks.poisoned && !ks.draining:
		return admitPoisoned
	case ks.poisoned:
		q.wait(ks, pendingLetter[T]{l: l, r: r})
		return admitHeldBack
	case l.Resume && ks.out && marked(ks.outMark, &l):
		// Back from a hold queue: it still holds its key.
		q.setOut(ks, false)
		return admitDeliver
	}
	// Any other letter waits for the key's turn, one marked Resume that
	// is not the key's message out included: a copy this source did not
	// send out (one that the previous reader of its partition held,
	// delivered again after a rebalance or a restart). Delivered at
	// once, it would take a second turn of the key beside the message
	// in flight or out, and the release of each would let a later
	// letter of the key go ahead of the other.
	q.wait(ks, pendingLetter[T]{l: l, r: r})
	return admitHeldBack
}

// letGo reports whether l, taken from h, goes back to the backend as h
// let go of where it came from: for a PartTracker, its part; for
// another reader, its shard, which h told let go of (or left out of its
// assignment) since the run began to take the letters l was taken with
// (see heldReader.gone and heldReader.tells). q.mu is held.
func (h *heldReader[T]) letGo(l *Letter[T]) bool {
	if h.parts != nil {
		return h.parts.LetGo(l.Receipt)
	}
	return h.tells != h.taking && h.gone.has(l.Shard)
}

// takeLetGo moves to out the letters waiting in ks that came from a part
// their reader, a PartTracker, let go of, and keeps the others waiting in
// their order.
func (q *sequencer[T]) takeLetGo(ks *keyState[T], out []pendingLetter[T]) []pendingLetter[T] {
	k := 0
	for _, p := range ks.waiting {
		if p.r != nil && p.r.parts != nil && p.r.parts.LetGo(p.l.Receipt) {
			out = append(out, p)
			continue
		}
		ks.waiting[k] = p
		k++
	}
	if n := len(ks.waiting) - k; n > 0 {
		q.held -= n
		clear(ks.waiting[k:])
		ks.waiting = ks.waiting[:k]
		if k == 0 {
			q.tally(ks, -1)
		}
	}
	return out
}

// taking records that the run begins to take letters from r: admit
// gives back only the letters of r's shards let go of that r told of
// since (see heldReader.tells).
func (q *sequencer[T]) taking(r *heldReader[T]) {
	q.mu.Lock()
	r.taking = r.tells
	q.mu.Unlock()
}

// wait appends p to ks's waiting letters.
func (q *sequencer[T]) wait(ks *keyState[T], p pendingLetter[T]) {
	if len(ks.waiting) == 0 {
		q.tally(ks, 1)
	}
	ks.waiting = append(ks.waiting, p)
	q.held++
}

// takeWaiting removes and returns every letter waiting in ks.
func (q *sequencer[T]) takeWaiting(ks *keyState[T]) []pendingLetter[T] {
	out := ks.waiting
	if len(out) > 0 {
		q.tally(ks, -1)
	}
	ks.waiting = nil
	q.held -= len(out)
	return out
}

// tally counts ks, which letters start (d = 1) or stop (d = -1) waiting
// in, in waitingKeys, and in outKeys when its message is out.
func (q *sequencer[T]) tally(ks *keyState[T], d int) {
	q.waitingKeys += d
	if ks.out {
		q.outKeys += d
	}
}

// setOut records whether ks's message is out in the backend.
func (q *sequencer[T]) setOut(ks *keyState[T], out bool) {
	if ks.out == out {
		return
	}
	ks.out = out
	if len(ks.waiting) > 0 {
		if out {
			q.outKeys++
		} else {
			q.outKeys--
		}
	}
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
	q.releaseLocked(key, ks)
}

// releaseLocked is release of ks, key's state, not poisoned; q.mu is
// held.
func (q *sequencer[T]) releaseLocked(key string, ks *keyState[T]) {
	q.setOut(ks, false) // its message is done with
	if len(ks.waiting) == 0 {
		q.forget(key, ks)
		return
	}
	next := ks.waiting[0]
	ks.waiting[0] = pendingLetter[T]{}
	ks.waiting = ks.waiting[1:]
	q.held--
	if len(ks.waiting) == 0 {
		q.tally(ks, -1)
	}
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
		q.keys[p.l.Key] = q.newKey(p.l.Shard)
	}
	q.ready = append(q.ready, p)
	q.wakeLocked()
	return true
}

// poison marks key, of shard, poisoned, follow the death error of its
// later messages (see keyState.follow), and
// returns the messages of it held back. The key is draining until drained
// returns nil: messages of it that arrive meanwhile are held back too, for
// the caller to dead-letter after these.
func (q *sequencer[T]) poison(key string, shard int, follow string) []pendingLetter[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	ks := q.keys[key]
	if ks == nil {
		ks = q.newKey(shard)
		q.keys[key] = ks
	}
	if !ks.poisoned {
		q.poisoned++
	}
	ks.poisoned, ks.draining, ks.follow = true, true, follow
	out := q.takeWaiting(ks)
	if len(out) > 0 {
		q.wakeLocked() // room for the run
	}
	return out
}

// drained returns the messages of poisoned key held back since the last
// poison or drained call; when there are none it ends the draining, and
// later messages of the key are dead-lettered as they arrive, unless an
// assignment left the key's shard out meanwhile: the key's poisoning is
// then forgotten (see assigned).
func (q *sequencer[T]) drained(key string) []pendingLetter[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	ks := q.keys[key]
	if ks == nil {
		return nil
	}
	out := q.takeWaiting(ks)
	switch {
	case len(out) > 0:
		q.wakeLocked() // room for the run
	case ks.moved:
		q.forget(key, ks)
	default:
		ks.draining = false
	}
	return out
}

// sentOut records that key's message in flight went to the backend, to
// come back through the reader marked Resume. At the limit it wakes the
// run: that may leave it nothing else to wait for (see room).
func (q *sequencer[T]) sentOut(l *Letter[T]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ks := q.keys[l.Key]
	switch {
	case ks == nil:
	case ks.moved: // a poisoned key has no message in flight to send out
		// It comes back to the shard's new owner, not here.
		q.releaseLocked(l.Key, ks)
	default:
		q.setOut(ks, true)
		ks.outMark = markOf(l)
		if q.held+len(q.ready) >= q.limit {
			q.wakeLocked()
		}
	}
}

// room returns how many letters the run may take from its reader now, at
// most max: as many as keep the letters held back (waiting or released
// and not yet delivered, as Stats.HeldBack counts them) within limit,
// each letter taken being held back at most. At the limit it is 0 (the run waits to be woken),
// unless every key with letters held back waits on its message out in the
// backend: that message comes back only through the reader, behind the
// letters not yet taken, and nothing else can make room, so the run takes
// letters one at a time past the limit (first reports the first such
// take since held was last below the limit) until one comes back.
func (q *sequencer[T]) room(max int) (n int, first bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := q.held + len(q.ready); n < q.limit {
		q.overdrawn = false
		return min(max, q.limit-n), false
	}
	if q.outKeys < q.waitingKeys || len(q.ready) > 0 {
		// A key's message in flight (or a poisoned key's draining),
		// or a letter ready, makes room without the reader.
		return 0, false
	}
	first = !q.overdrawn
	q.overdrawn = true
	return 1, first
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

// poisonedKeys returns the number of keys remembered as poisoned.
func (q *sequencer[T]) poisonedKeys() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.poisoned
}

// giveBack removes and returns the letters r handed out that wait behind
// an earlier message of their key, each key's from the first of r's on,
// in order (a later one of another reader included, so that none of the
// key's overtakes them), but not those of a poisoned key being drained,
// which are being dead-lettered. The keys keep their message in flight,
// so the letters given back wait behind it again when they come back.
// Nothing once drain was called.
func (q *sequencer[T]) giveBack(r *heldReader[T]) []pendingLetter[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []pendingLetter[T]
	for _, ks := range q.keys {
		if ks.draining {
			continue
		}
		i := slices.IndexFunc(ks.waiting, func(p pendingLetter[T]) bool { return p.r == r })
		if i < 0 {
			continue
		}
		out = append(out, ks.waiting[i:]...)
		q.held -= len(ks.waiting) - i
		clear(ks.waiting[i:])
		ks.waiting = ks.waiting[:i]
		if i == 0 {
			q.tally(ks, -1)
		}
	}
	if len(out) > 0 {
		q.wakeLocked() // room for the run
	}
	return out
}

// letGo removes and returns the letters held back behind their key's
// message that r, the reader, handed out from the part it lets go of
// (its next owner receives them again), but not those of a poisoned key
// being drained, which are being dead-lettered: for a PartTracker, the
// letters of that part, whatever their shard; for another reader, those
// whose shard is in. The keys keep their message in flight or out:
// should the part come back to the reader at once (an eager rebalance
// gives a member its partitions back), the letters wait behind it
// again. From then on admit gives back the letters of the part that r
// handed out as it told so (for a reader that is no PartTracker, those
// of the shards let go of, until an assignment of r gives them back:
// see heldReader.gone and heldReader.tells). Nothing once drain was
// called.
func (q *sequencer[T]) letGo(r *heldReader[T], in func(shard int) bool) []pendingLetter[T] {
	gone := shardSetOf(q.shards, in)
	q.mu.Lock()
	defer q.mu.Unlock()
	r.gone = r.gone.union(gone)
	r.tells++
	var out []pendingLetter[T]
	for _, ks := range q.keys {
		switch {
		case ks.draining || len(ks.waiting) == 0:
		case r.parts != nil:
			out = q.takeLetGo(ks, out)
		case in(ks.shard):
			out = append(out, q.takeWaiting(ks)...)
		}
	}
	// Room for the run, and a run waiting on r takes letters again as
	// of this tell (see taking).
	q.wakeLocked()
	return out
}

// assigned is told the reader's new assignment (in): a key whose shard
// is not in it has its message out come back to the shard's new owner.
// Such a key whose message is out is done with here: its next letter
// held back, if any, takes its turn, or else it is forgotten, so that
// should its shard come back later its letters are admitted as they
// arrive; one whose message is in flight (or ready) is marked moved, so
// that should that message go out the key is done with here (sentOut).
// A key whose shard is in the assignment is no longer moved. It removes
// and returns, for the caller to give back, the letters held back of
// the keys not in it that r, a PartTracker, handed out from a part it let
// go of (those of the parts it holds, a partition holding letters of a
// shard that a grown partition count routes elsewhere, stay, and go in
// their turn); from another reader, all of them. A poisoned key whose
// shard is not in it is forgotten, its later letters being its shard's
// new owner's to handle (one being drained once its draining ends, see
// drained); one whose shard is in it stays poisoned. From then on admit
// gives back the letters that r handed out as it told it from the parts
// it let go of (a PartTracker), or else of the shards not in it, and
// admits those of the shards in it as before, whatever r let go of
// earlier (see heldReader.gone). Nothing once drain was called.
func (q *sequencer[T]) assigned(r *heldReader[T], in func(shard int) bool) []pendingLetter[T] {
	gone := shardSetOf(q.shards, func(shard int) bool { return !in(shard) })
	q.mu.Lock()
	defer q.mu.Unlock()
	r.gone = gone
	r.tells++
	var out []pendingLetter[T]
	for key, ks := range q.keys {
		switch {
		case in(ks.shard):
			ks.moved = false
		case ks.poisoned && ks.draining:
			ks.moved = true
		case ks.poisoned:
			q.forget(key, ks)
		default:
			if r.parts != nil {
				out = q.takeLetGo(ks, out)
			} else {
				out = append(out, q.takeWaiting(ks)...)
			}
			if ks.out {
				q.releaseLocked(key, ks)
			} else {
				ks.moved = true
			}
		}
	}
	q.wakeLocked() // as letGo's
	return out
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
	q.held, q.waitingKeys, q.outKeys = 0, 0, 0
	return out
}

// shardSet is a set of routing shards, a bit each; nil is empty.
type shardSet []uint64

// shardSetOf returns the set of the shards below n for which in is true.
func shardSetOf(n int, in func(shard int) bool) shardSet {
	var s shardSet
	for shard := range n {
		if in(shard) {
			if s == nil {
				s = make(shardSet, (n+63)/64)
			}
			s[shard/64] |= 1 << (shard % 64)
		}
	}
	return s
}

// has reports whether shard is in s.
func (s shardSet) has(shard int) bool {
	return shard >= 0 && shard/64 < len(s) && s[shard/64]&(1<<(shard%64)) != 0
}

// union returns the shards in s or o, reusing s.
func (s shardSet) union(o shardSet) shardSet {
	if len(s) < len(o) {
		s = append(s, make(shardSet, len(o)-len(s))...)
	}
	for i, w := range o {
		s[i] |= w
	}
	return s
}

// follow returns the death error of the later messages of poisoned key
// (see keyState.follow).
func (q *sequencer[T]) follow(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ks := q.keys[key]; ks != nil {
		return ks.follow
	}
	return ""
}
