package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Queue is a bounded multi-producer multi-consumer FIFO. Each item goes to
// exactly one receiver.
//
// Items are received in the order they were published: items published by
// one goroutine are received in that goroutine's publish order, and a single
// receiver sees them in that order too. Items given back with
// [Queue.PutFront] go ahead of them. When several receivers share a
// queue, each item goes to whichever receiver takes it first; a receiver
// that gives back what it took with [Queue.PutBack] leaves every other
// receiver's order as it was.
//
// Waiting goroutines are woken in the order they started waiting, and only
// as many as the work needs: when items arrive, enough waiting receivers are
// woken to take all of them, counting each as able to take len(buf) items
// (it takes everything queued, up to len(buf), when it runs); when room
// appears, enough waiting publishers are woken to fill it. Receivers are
// woken at most GOMAXPROCS−1 (at least 1) ahead: that many woken receivers
// that have not run yet, and no more. A woken receiver that takes items
// wakes the next if items are left, so a burst reaches every waiting
// receiver one wake-up after another; waking more receivers than there are
// processors to run them only lines them up behind each other, each with a
// wake-up to pay for, while a receiver that is already running would take
// the same items without one. A woken goroutine
// may be overtaken by a caller that arrives while it is being scheduled; it
// then waits again. Wakeups are never lost: a waiter that gives up (context
// cancelled, alarm fired) after it was chosen to be woken hands the wakeup on
// to the next waiter.
//
// A Queue must be created with [New]. All methods are safe for
// concurrent use. The zero value is not usable.
type Queue[T any] struct {
	mu sync.Mutex
	// items is the ring storage. It starts at initialSlots (or the
	// capacity, if smaller) and doubles as items arrive, up to the
	// capacity, so a large capacity costs only what is queued; it is more
	// than the capacity while items put back at the head (PutFront) take
	// the queue over it.
	items  []T
	limit  int // the capacity
	head   int // index of the oldest queued item
	count  int // number of queued items
	closed bool
	// takes counts the receives that took items (Receive, ReceiveOr,
	// ReceiveOrTake, TryReceive): the number of the latest one, which
	// PutBack compares.
	takes uint64

	recv waitList // receivers waiting for items
	pub  waitList // publishers waiting for room
	free *waiter  // recycled waiters, linked through next

	// wakeAhead is how many receivers may be signalled and not yet run at
	// once: GOMAXPROCS−1 when the queue was made, at least 1.
	wakeAhead int
}

// waiter is one goroutine parked in a blocking operation. It is owned by that
// goroutine for the duration of the call and recycled through Queue.free
// afterwards, so steady-state waiting does not allocate.
//
// Protocol (all fields guarded by Queue.mu): a waiter is pushed onto a
// waitList, then its goroutine releases the mutex and selects on ch. To wake
// it, the queue pops it off the list, sets signalled, adds want to the list's
// pending total and sends one token on ch (which never blocks: ch has
// capacity 1 and holds at most one token). Every waiter is therefore either
// on its list or signalled, never both. When the goroutine reacquires the
// mutex after taking the token it calls waitList.woke; when it gives up
// instead, it calls Queue.abandon, which either unlinks it (not signalled)
// or consumes the token and passes the wakeup on (signalled).
type waiter struct {
	ch         chan struct{}
	prev, next *waiter
	// want is how many items (receiver) or free slots (publisher) this
	// waiter can absorb when it runs, in 1..capacity.
	want      int
	signalled bool
}

// waitList is an intrusive FIFO of waiters.
type waitList struct {
	head, tail *waiter
	// pending is the sum of want over the waiters that have been signalled
	// and have not yet run (woke or abandon), and ahead is how many they
	// are. The queue keeps the invariant
	//
	//	list empty || pending >= supply || ahead >= limit
	//
	// after every critical section, where supply is the number of queued
	// items (for receivers) or free slots (for publishers), and limit is
	// Queue.wakeAhead for receivers (publishers have none). It means every
	// item or slot is covered by a goroutine that is already on its way, or
	// the limit of goroutines on their way is reached and each of them
	// wakes the next when it runs, so no wakeup is missing, while not waking
	// more goroutines than the available work (or the processors) can keep
	// busy.
	//
	// Receivers only start waiting when the queue is empty and publishers
	// only when it is full, so the invariant holds when a waiter is listed.
	// A woken waiter lowers pending by its want but then takes (or fills)
	// min(want, supply), which keeps it; adding items or freeing slots, and
	// a signalled waiter running or giving up, can break it and are followed by
	// wakeReceivers/wakePublishers. Every critical section that changes the
	// queue calls both anyway, so the invariant can be checked locally; where
	// there is nothing to do that costs one comparison.
	pending int
	ahead   int
}

func (l *waitList) pushBack(w *waiter) {
	w.next = nil
	w.prev = l.tail
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
}

func (l *waitList) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
}

// signalFront wakes the oldest waiter. The list must not be empty.
func (l *waitList) signalFront() {
	w := l.head
	l.remove(w)
	l.pending += w.want
	l.ahead++
	w.signalled = true
	w.ch <- struct{}{} // never blocks: the token slot is empty while w is listed
}

// woke records that the signalled waiter w has taken its token and holds the
// mutex again.
func (l *waitList) woke(w *waiter) {
	l.pending -= w.want
	l.ahead--
	w.signalled = false
}

// initialSlots is the size of a new queue's ring when its capacity is
// larger: the ring grows as items arrive.
const initialSlots = 64

// New returns an empty open queue that holds at most capacity items.
// It does not block. It panics if capacity < 1: that is a programming error,
// and callers are expected to have validated their options first. The
// queue reserves room for min(capacity, 64) items and grows, doubling, as
// items arrive: a queue never filled beyond a few items costs no more for
// a large capacity.
func New[T any](capacity int) *Queue[T] {
	if capacity < 1 {
		panic(fmt.Sprintf("queue: New capacity %d, must be at least 1", capacity))
	}
	return &Queue[T]{items: make([]T, min(capacity, initialSlots)), limit: capacity, wakeAhead: max(1, runtime.GOMAXPROCS(0)-1)}
}

// roomLocked makes the ring hold at least n items, n at most the
// capacity: it doubles it (at least to n, at most to the capacity).
func (q *Queue[T]) roomLocked(n int) {
	if n > len(q.items) {
		q.resizeLocked(min(q.limit, max(n, 2*len(q.items))))
	}
}

// Publish appends v to the queue. It blocks while the queue is full.
//
// It returns nil once v is queued. It returns ctx.Err() if ctx is done before
// room becomes available (including when ctx is already done on entry, even
// if there is room); v is then not published. It returns ErrClosed if
// the queue is closed, or is closed while Publish waits; v is then not
// published either.
func (q *Queue[T]) Publish(ctx context.Context, v T) error {
	one := [1]T{v}
	_, err := q.PublishBatch(ctx, one[:])
	return err
}

// PublishBatch appends the items of vs to the queue, in order. It publishes
// as many as fit at once under a single lock acquisition, then blocks until
// there is room for the rest, repeating until all are queued.
//
// It returns how many items were published, always a prefix of vs, and nil
// when that is all of them. If it stops early it returns the count so far and
// ctx.Err() (ctx done, including already done on entry) or ErrClosed
// (queue closed); the items after the prefix were not published. An empty vs
// returns 0, nil unless the queue is closed or ctx is already done.
func (q *Queue[T]) PublishBatch(ctx context.Context, vs []T) (int, error) {
	done := ctx.Done()
	if IsDone(done) {
		return 0, ctx.Err()
	}
	q.mu.Lock()
	var w *waiter
	published := 0
	for {
		if q.closed {
			q.recycle(w)
			q.mu.Unlock()
			return published, ErrClosed
		}
		published += q.putLocked(vs[published:])
		if published == len(vs) {
			q.recycle(w)
			q.mu.Unlock()
			return published, nil
		}
		// The queue is full and items remain.
		if w == nil {
			w = q.newWaiter()
		}
		w.want = min(len(vs)-published, q.limit)
		q.pub.pushBack(w)
		q.mu.Unlock()
		select {
		case <-w.ch:
			q.mu.Lock()
			q.pub.woke(w)
		case <-done:
			q.mu.Lock()
			q.abandon(&q.pub, w)
			q.mu.Unlock()
			return published, ctx.Err()
		}
	}
}

// TryPublishBatch appends as many items of vs as there is room for, in
// order, under one lock acquisition. It never blocks.
//
// It returns how many items were queued (a prefix of vs), and
// ErrClosed (with 0) when the queue is closed.
func (q *Queue[T]) TryPublishBatch(vs []T) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, ErrClosed
	}
	return q.putLocked(vs), nil
}

// TryPublish appends v to the queue if there is room. It never blocks.
//
// It returns true, nil if v was queued; false, nil if the queue is full; and
// false, ErrClosed if the queue is closed.
func (q *Queue[T]) TryPublish(v T) (bool, error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false, ErrClosed
	}
	if q.count >= q.limit {
		q.mu.Unlock()
		return false, nil
	}
	q.pushLocked(v)
	q.mu.Unlock()
	return true, nil
}

// PutFront puts vs back at the head of the queue, in order, ahead of every
// item queued: the next receive takes vs[0] first. It is for a receiver
// that gives back items it received from the queue and will not handle (a
// consumer that stops), so that they keep their place. It never blocks: when
// the queue has no room for vs it goes over its capacity, by at most
// len(vs), allocating a larger ring that shrinks back to the capacity once
// receivers have taken the queue below it; publishers meanwhile wait, as on
// a full queue. Since the items were received from the queue, the queue and
// its receivers together never hold more than was published into it. A
// receiver that took later items meanwhile receives vs after them;
// [Queue.PutBack] refuses in that case.
//
// It returns nil once vs is queued (at once for an empty vs), and ErrClosed
// when the queue is closed (nothing is queued then).
func (q *Queue[T]) PutFront(vs []T) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	q.putFrontLocked(vs)
	return nil
}

// PutBack is [Queue.PutFront] for the items vs that the receive numbered
// take (see [Queue.ReceiveOrTake]) took, done only while that receive is
// the latest that took items from the queue: the queue is then as if vs
// had never been taken, and every receiver still receives items in the
// order of the queue. Once another receive has taken items (later ones,
// which going back ahead of them would hand to a receiver after those),
// it returns ErrTakenSince and queues nothing; on a closed queue,
// ErrClosed. It never blocks.
func (q *Queue[T]) PutBack(vs []T, take uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if q.takes != take {
		return ErrTakenSince
	}
	q.putFrontLocked(vs)
	return nil
}

// PutBackDraining is [Queue.PutBack] for a queue that receivers still
// drain once it is closed: on a closed queue it queues vs too, and the
// receivers get them, in order, before [ErrDrained]. It returns
// ErrTakenSince as PutBack does, open or closed. The caller knows that
// some receiver will still drain the queue; nothing else receives vs.
func (q *Queue[T]) PutBackDraining(vs []T, take uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.takes != take {
		return ErrTakenSince
	}
	q.putFrontLocked(vs)
	return nil
}

// PutTail appends vs to the tail of the queue, in order, after every item
// queued, and never blocks: when the queue has no room it goes over its
// capacity, growing its ring (by half at least, so a run of PutTail
// calls copies the ring a logarithmic number of times), which shrinks
// back to the capacity once receivers have taken the queue below it;
// publishers meanwhile wait, as on a full queue, and so do not overtake
// vs. It is for items that were received from the queue and come back to
// it (a retry), whose number the caller bounds: so that a queue that
// only its own receivers drain never waits on itself. It returns nil once
// vs is queued (at once for an empty vs), and ErrClosed when the queue is
// closed (nothing is queued then).
func (q *Queue[T]) PutTail(vs []T) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	n := len(vs)
	if n == 0 {
		return nil
	}
	if q.count+n > len(q.items) {
		q.resizeLocked(max(q.count+n, len(q.items)+len(q.items)/2))
	}
	size := len(q.items)
	tail := q.head + q.count
	if tail >= size {
		tail -= size
	}
	k := copy(q.items[tail:], vs)
	copy(q.items, vs[k:])
	q.count += n
	q.wakeReceivers()
	q.wakePublishers()
	return nil
}

// putFrontLocked puts vs at the head of the queue, over its capacity if
// need be (see PutFront).
func (q *Queue[T]) putFrontLocked(vs []T) {
	n := len(vs)
	if n == 0 {
		return
	}
	if q.count+n > len(q.items) {
		q.resizeLocked(q.count + n)
	}
	size := len(q.items)
	h := q.head - n
	if h < 0 {
		h += size
	}
	k := copy(q.items[h:], vs)
	copy(q.items, vs[k:])
	q.head = h
	q.count += n
	q.wakeReceivers()
	q.wakePublishers()
}

// resizeLocked moves the queued items, in order, to the front of a new ring
// of size slots; size is at least q.count.
func (q *Queue[T]) resizeLocked(size int) {
	items := make([]T, size)
	if end := q.head + q.count; end <= len(q.items) {
		copy(items, q.items[q.head:end])
	} else {
		k := copy(items, q.items[q.head:])
		copy(items[k:], q.items[:q.count-k])
	}
	q.items, q.head = items, 0
}

// Receive moves up to len(buf) of the oldest items into buf[:n], in FIFO
// order. It blocks until at least one item is available, then takes as many
// as are queued (up to len(buf)) under a single lock acquisition, without
// waiting for more.
//
// It returns n >= 1 and nil on success. After Close it keeps returning the
// remaining items and then returns 0, ErrDrained. It returns 0,
// ctx.Err() if ctx is done before an item arrives (including when ctx is
// already done on entry, even if items are queued); nothing is removed from
// the queue then. It panics if len(buf) == 0, which is a programming error
// (a zero-length receive could never make progress).
func (q *Queue[T]) Receive(ctx context.Context, buf []T) (int, error) {
	n, _, _, err := q.receive(ctx, buf, nil, nil)
	return n, err
}

// ReceiveOr is like [Queue.Receive] but also stops waiting when alarm
// delivers a value, and then returns 0, nil; a nil alarm never fires. If
// items are already queued they are returned without looking at alarm. It
// blocks until an item arrives, the queue is closed and drained, ctx is done,
// or alarm fires.
//
// It returns n >= 1, nil when it received items; 0, nil only when it consumed
// a value from alarm; 0, ErrDrained when the queue is closed and
// drained; and 0, ctx.Err() when ctx is done. It is meant for a batcher that
// waits for "the next item or the batch timeout" using one reusable
// [time.Timer]: pass the timer's C as alarm, and on 0, nil treat the timer as
// fired (its value has been consumed). It panics if len(buf) == 0.
func (q *Queue[T]) ReceiveOr(ctx context.Context, buf []T, alarm <-chan time.Time) (int, error) {
	n, _, _, err := q.receive(ctx, buf, alarm, nil)
	return n, err
}

// ReceiveOrWake is [Queue.ReceiveOr] that also stops waiting when wake
// delivers a value, and then returns 0, true, nil (woken); a nil wake never
// fires. When alarm fired it returns 0, false, nil. As with alarm, queued
// items are returned without looking at wake: a wake is consumed only by
// a call that found the queue empty (items published while it waits may
// then stay queued for the next call).
func (q *Queue[T]) ReceiveOrWake(ctx context.Context, buf []T, alarm <-chan time.Time, wake <-chan struct{}) (n int, woken bool, err error) {
	n, _, woken, err = q.receive(ctx, buf, alarm, wake)
	return n, woken, err
}

// ReceiveOrTake is [Queue.ReceiveOr] that also returns, when it received
// items, the number of this receive among those that took items from the
// queue: what [Queue.PutBack] needs to give them back. take is 0 when it
// received nothing.
func (q *Queue[T]) ReceiveOrTake(ctx context.Context, buf []T, alarm <-chan time.Time) (n int, take uint64, err error) {
	n, take, _, err = q.receive(ctx, buf, alarm, nil)
	return n, take, err
}

func (q *Queue[T]) receive(ctx context.Context, buf []T, alarm <-chan time.Time, wake <-chan struct{}) (int, uint64, bool, error) {
	if len(buf) == 0 {
		panic("queue: Receive with an empty buffer")
	}
	done := ctx.Done()
	if IsDone(done) {
		return 0, 0, false, ctx.Err()
	}
	q.mu.Lock()
	var w *waiter
	for {
		if q.count > 0 {
			n := q.takeLocked(buf)
			take := q.takes
			q.recycle(w)
			q.mu.Unlock()
			return n, take, false, nil
		}
		if q.closed {
			q.recycle(w)
			q.mu.Unlock()
			return 0, 0, false, ErrDrained
		}
		if w == nil {
			w = q.newWaiter()
		}
		w.want = min(len(buf), q.limit)
		q.recv.pushBack(w)
		q.mu.Unlock()
		select {
		case <-w.ch:
			q.mu.Lock()
			q.recv.woke(w)
		case <-done:
			q.mu.Lock()
			q.abandon(&q.recv, w)
			q.mu.Unlock()
			return 0, 0, false, ctx.Err()
		case <-alarm:
			q.mu.Lock()
			q.abandon(&q.recv, w)
			q.mu.Unlock()
			return 0, 0, false, nil
		case <-wake:
			q.mu.Lock()
			q.abandon(&q.recv, w)
			q.mu.Unlock()
			return 0, 0, true, nil
		}
	}
}

// TryReceive moves up to len(buf) of the oldest items into buf[:n] if any are
// queued. It never blocks.
//
// It returns n >= 1, nil when it received items; 0, nil when the queue is
// empty and open; and 0, ErrDrained when the queue is closed and
// drained. It panics if len(buf) == 0.
func (q *Queue[T]) TryReceive(buf []T) (int, error) {
	if len(buf) == 0 {
		panic("queue: TryReceive with an empty buffer")
	}
	q.mu.Lock()
	if q.count > 0 {
		n := q.takeLocked(buf)
		q.mu.Unlock()
		return n, nil
	}
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return 0, ErrDrained
	}
	return 0, nil
}

// Close closes the queue. It does not block (beyond the internal lock) and
// returns nothing. It is idempotent.
//
// After Close, every publish operation returns ErrClosed, including
// those blocked at the time of the call, which are woken. Receivers are
// woken too; they receive the items still queued and then get
// ErrDrained.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		for q.recv.head != nil {
			q.recv.signalFront()
		}
		for q.pub.head != nil {
			q.pub.signalFront()
		}
	}
	q.mu.Unlock()
}

// Len returns the number of items currently queued (more than Cap while
// items given back with PutFront take the queue over its capacity). It does
// not block (beyond the internal lock). The value may be stale as soon as it
// returns.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	n := q.count
	q.mu.Unlock()
	return n
}

// Cap returns the capacity the queue was created with. It does not block.
func (q *Queue[T]) Cap() int {
	return q.limit
}

// Closed reports whether Close has been called. It does not block (beyond
// the internal lock). A closed queue may still hold items to be received.
func (q *Queue[T]) Closed() bool {
	q.mu.Lock()
	c := q.closed
	q.mu.Unlock()
	return c
}

// pushLocked appends v. The queue must be open and below its capacity.
func (q *Queue[T]) pushLocked(v T) {
	if q.count == len(q.items) {
		q.roomLocked(q.count + 1)
	}
	tail := q.head + q.count
	if tail >= len(q.items) {
		tail -= len(q.items)
	}
	q.items[tail] = v
	q.count++
	q.wakeReceivers()
	q.wakePublishers()
}

// putLocked appends as many items of vs as fit below the capacity and
// returns how many.
func (q *Queue[T]) putLocked(vs []T) int {
	n := min(len(vs), q.limit-q.count)
	if n <= 0 {
		return 0
	}
	if q.count+n > len(q.items) {
		q.roomLocked(q.count + n)
	}
	size := len(q.items)
	tail := q.head + q.count
	if tail >= size {
		tail -= size
	}
	k := copy(q.items[tail:], vs[:n])
	copy(q.items, vs[k:n])
	q.count += n
	q.wakeReceivers()
	q.wakePublishers()
	return n
}

// takeLocked moves up to len(buf) items into buf, zeroing the slots they
// leave so the queue does not keep them reachable. There must be at least
// one item.
func (q *Queue[T]) takeLocked(buf []T) int {
	size := len(q.items)
	n := min(len(buf), q.count)
	if end := q.head + n; end <= size {
		copy(buf, q.items[q.head:end])
		clear(q.items[q.head:end])
		q.head = end
	} else {
		k := copy(buf, q.items[q.head:])
		clear(q.items[q.head:])
		copy(buf[k:n], q.items[:n-k])
		clear(q.items[:n-k])
		q.head = n - k
	}
	q.count -= n
	q.takes++
	if q.count == 0 || q.head == size {
		// Restart at the front so later batches are contiguous.
		q.head = 0
	}
	if size > q.limit && q.count <= q.limit {
		// Back within the capacity after a PutFront took the queue over
		// it: the ring shrinks back to the capacity.
		q.resizeLocked(q.limit)
	}
	q.wakePublishers()
	q.wakeReceivers()
	return n
}

// wakeReceivers signals receive waiters, oldest first, until the signalled
// ones can absorb every queued item, wakeAhead of them are on their way, or
// none are left. Called after anything that adds items, lowers
// recv.pending or recv.ahead.
func (q *Queue[T]) wakeReceivers() {
	for q.recv.head != nil && q.recv.pending < q.count && q.recv.ahead < q.wakeAhead {
		q.recv.signalFront()
	}
}

// wakePublishers signals publish waiters, oldest first, until the signalled
// ones can fill every free slot or none are left. Called after anything that
// frees slots or lowers pub.pending.
func (q *Queue[T]) wakePublishers() {
	for q.pub.head != nil && q.pub.pending < q.limit-q.count {
		q.pub.signalFront()
	}
}

// abandon removes w, whose goroutine stopped waiting without using a wakeup,
// from l. If w had already been signalled, its token is consumed and the
// wakeup is passed on to whichever waiters now need it, so it is not lost.
// w is recycled. q.mu must be held.
func (q *Queue[T]) abandon(l *waitList, w *waiter) {
	if w.signalled {
		<-w.ch // sent under q.mu before we locked it, so it is there
		l.woke(w)
		q.wakeReceivers()
		q.wakePublishers()
	} else {
		l.remove(w)
	}
	q.recycle(w)
}

// newWaiter returns a waiter from the free list, or a new one. q.mu must be
// held.
func (q *Queue[T]) newWaiter() *waiter {
	w := q.free
	if w == nil {
		return &waiter{ch: make(chan struct{}, 1)}
	}
	q.free = w.next
	w.next = nil
	return w
}

// recycle puts w (which may be nil) on the free list. w must be off every
// wait list, unsignalled, and its channel empty. q.mu must be held.
func (q *Queue[T]) recycle(w *waiter) {
	if w == nil {
		return
	}
	w.prev = nil
	w.next = q.free
	q.free = w
}

// IsDone reports whether done is closed; a nil done (a context that cannot
// be cancelled) never is.
func IsDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// WaitRoom blocks until the queue has a free slot, reserving nothing. It
// returns nil when there is room, ErrClosed if the queue is (or
// becomes) closed, and ctx.Err() if ctx is done first. A mixed topic uses it
// to wait for one full group without holding capacity in the others.
func (q *Queue[T]) WaitRoom(ctx context.Context) error {
	done := ctx.Done()
	q.mu.Lock()
	var w *waiter
	for {
		if q.closed {
			q.recycle(w)
			q.mu.Unlock()
			return ErrClosed
		}
		if q.count < q.limit {
			q.recycle(w)
			// This waiter filled nothing: pass the wakeup on if another
			// publisher needs it.
			q.wakePublishers()
			q.mu.Unlock()
			return nil
		}
		if w == nil {
			w = q.newWaiter()
		}
		w.want = 1
		q.pub.pushBack(w)
		q.mu.Unlock()
		select {
		case <-w.ch:
			q.mu.Lock()
			q.pub.woke(w)
		case <-done:
			q.mu.Lock()
			q.abandon(&q.pub, w)
			q.mu.Unlock()
			return ctx.Err()
		}
	}
}
