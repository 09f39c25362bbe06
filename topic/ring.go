package topic

import (
	"context"
	"sync"
	"sync/atomic"
)

// ring is the broadcast buffer: the last len(slots) messages, each read by
// every subscriber through its own cursor. Publishing never waits; a
// subscriber more than len(slots) behind has lost the overwritten messages
// (DropOldest: it is told how many and continues from the oldest retained
// one; Disconnect: it is removed when the overwrite happens, and told once).
//
// Every slot counts the subscribers that were connected when it was written
// and have not read it (unread); that is what lets a tracked message be
// nacked when a subscriber that should have received it never will, and
// lets the ring drop its reference to a value as soon as every subscriber
// has read it.
type ring[T any] struct {
	mu sync.Mutex
	// slots starts at initialRingSlots (or the capacity, if smaller) and
	// doubles, up to the capacity, when a write would overwrite a message
	// a subscriber has not read: a ring whose subscribers keep up costs
	// no more for a large capacity.
	slots    []rslot[T]
	capacity int
	head     uint64 // sequence number of the next write; slot = seq % len
	closed   bool
	onLag    OnLag
	subs     []*ringSub[T] // connected subscribers
	waiting  []*ringSub[T] // subscribers parked in Receive
	lagged   atomic.Uint64
}

type rslot[T any] struct {
	e      memEnv[T]
	unread int
}

// initialRingSlots is the size of a new ring when its capacity is larger.
const initialRingSlots = 64

func newRing[T any](capacity int, onLag OnLag) *ring[T] {
	return &ring[T]{slots: make([]rslot[T], min(capacity, initialRingSlots)), capacity: capacity, onLag: onLag}
}

// growLocked doubles the ring, up to its capacity, keeping the messages of
// the last len(slots) sequence numbers, which its subscribers read by
// sequence number.
func (r *ring[T]) growLocked() {
	size := uint64(len(r.slots))
	slots := make([]rslot[T], min(2*len(r.slots), r.capacity))
	n := uint64(len(slots))
	for seq := r.head - size; seq < r.head; seq++ {
		slots[seq%n] = r.slots[seq%size]
	}
	r.slots = slots
}

// publish writes e for every connected subscriber; extra more recipients
// (balanced groups of a mixed topic) are counted into its ticket.
func (r *ring[T]) publish(e Envelope[T], extra int) (PublishOutcome, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return Published, ErrTopicClosed
	}
	evicted, dropped := r.putLocked(e, extra)
	r.mu.Unlock()
	dropLagged(evicted, dropped)
	return Published, nil
}

// publishLocked is publish for a caller that knows the ring is open (the
// mixed topic, under its own lock, which also guards closing).
func (r *ring[T]) publishLocked(e Envelope[T], extra int) (*Ticket, []*Ticket) {
	r.mu.Lock()
	evicted, dropped := r.putLocked(e, extra)
	r.mu.Unlock()
	return evicted, dropped
}

// putLocked writes e, overwriting the oldest slot when full. It returns the
// tickets whose deliveries were lost, to be dropped after unlocking.
func (r *ring[T]) putLocked(e Envelope[T], extra int) (evicted *Ticket, dropped []*Ticket) {
	size := uint64(len(r.slots))
	if r.head >= size && r.slots[r.head%size].unread > 0 && len(r.slots) < r.capacity {
		// A subscriber has not read the oldest message: the ring grows
		// rather than overwrite it while below its capacity.
		r.growLocked()
		size = uint64(len(r.slots))
	}
	if r.head >= size {
		old := &r.slots[r.head%size]
		if old.unread > 0 {
			if r.onLag == Disconnect {
				dropped = r.disconnectLocked(r.head - size)
			} else {
				evicted = old.e.ticket
			}
		}
	}
	e.Ticket.SetRecipients(len(r.subs) + extra)
	sl := rslot[T]{unread: len(r.subs)}
	if sl.unread > 0 {
		// With no subscriber connected nobody will read the slot (a later
		// subscriber starts at head): keep only its place in the sequence,
		// not the value, which may be large.
		sl.e = memEnvOf(&e)
	}
	r.slots[r.head%size] = sl
	r.head++
	for i, s := range r.waiting {
		s.waiting = false
		select {
		case s.wake <- struct{}{}:
		default:
		}
		r.waiting[i] = nil
	}
	r.waiting = r.waiting[:0]
	return evicted, dropped
}

// disconnectLocked removes every subscriber that has not read seq (about to
// be overwritten) and returns the tickets of the retained messages they
// will now never receive.
func (r *ring[T]) disconnectLocked(seq uint64) []*Ticket {
	var lost []*Ticket
	keep := r.subs[:0]
	for _, s := range r.subs {
		if s.next > seq {
			keep = append(keep, s)
			continue
		}
		missed := r.head - s.next
		lost = r.releaseLocked(s, lost)
		s.gone = true
		s.final = missed
		r.lagged.Add(missed)
		s.signal()
	}
	clear(r.subs[len(keep):])
	r.subs = keep
	return lost
}

// releaseLocked gives up s's claim on the retained messages it has not
// read, appending their tickets to lost.
func (r *ring[T]) releaseLocked(s *ringSub[T], lost []*Ticket) []*Ticket {
	size := uint64(len(r.slots))
	start := s.next
	if r.head > size && start < r.head-size {
		start = r.head - size
	}
	for seq := start; seq < r.head; seq++ {
		sl := &r.slots[seq%size]
		sl.unread--
		if sl.e.ticket != nil {
			lost = append(lost, sl.e.ticket)
		}
		if sl.unread == 0 {
			sl.e = memEnv[T]{}
		}
	}
	s.next = r.head
	return lost
}

func (r *ring[T]) subscribe() *ringSub[T] {
	s := &ringSub[T]{r: r, wake: make(chan struct{}, 1)}
	r.mu.Lock()
	s.next = r.head
	r.subs = append(r.subs, s)
	r.mu.Unlock()
	return s
}

func (r *ring[T]) stats() (subs int, lagged uint64) {
	r.mu.Lock()
	subs = len(r.subs)
	r.mu.Unlock()
	return subs, r.lagged.Load()
}

func (r *ring[T]) close() {
	r.mu.Lock()
	r.closed = true
	for _, s := range r.subs {
		s.signal()
	}
	r.mu.Unlock()
}

// ringSub is one broadcast subscriber.
type ringSub[T any] struct {
	r       *ring[T]
	next    uint64 // sequence number of the next message to read
	wake    chan struct{}
	waiting bool
	gone    bool   // closed or disconnected
	final   uint64 // pending final lag notice of a disconnect
}

func (s *ringSub[T]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Receive implements SubscriptionState.
func (s *ringSub[T]) Receive(ctx context.Context, dst []Envelope[T]) (int, error) {
	done := ctx.Done()
	if isDone(done) {
		return 0, ctx.Err()
	}
	r := s.r
	r.mu.Lock()
	for {
		if s.gone {
			if s.final > 0 {
				dst[0] = Envelope[T]{Lagged: s.final}
				s.final = 0
				r.mu.Unlock()
				return 1, nil
			}
			r.mu.Unlock()
			return 0, ErrSubscriptionClosed
		}
		if s.next < r.head {
			size := uint64(len(r.slots))
			if r.head-s.next > size {
				missed := r.head - size - s.next
				s.next = r.head - size
				r.lagged.Add(missed)
				r.mu.Unlock()
				dst[0] = Envelope[T]{Lagged: missed}
				return 1, nil
			}
			n := 0
			for s.next < r.head && n < len(dst) {
				sl := &r.slots[s.next%size]
				dst[n] = sl.e.envelope()
				sl.unread--
				if sl.unread == 0 {
					// Nobody else will read it: do not keep the value alive.
					sl.e = memEnv[T]{}
				}
				s.next++
				n++
			}
			r.mu.Unlock()
			return n, nil
		}
		if r.closed {
			r.mu.Unlock()
			return 0, ErrSubscriptionClosed
		}
		if !s.waiting {
			s.waiting = true
			r.waiting = append(r.waiting, s)
		}
		r.mu.Unlock()
		select {
		case <-s.wake:
		case <-done:
			return 0, ctx.Err()
		}
		r.mu.Lock()
	}
}

// Settle implements SubscriptionState: the in-memory backend does not
// settle deliveries.
func (s *ringSub[T]) Settle(MessageID, error) error { return ErrMessageNotTracked }

// Close implements SubscriptionState: the subscriber leaves and drops the
// tracked messages it has not read.
func (s *ringSub[T]) Close() {
	r := s.r
	r.mu.Lock()
	if s.gone {
		s.final = 0
		r.mu.Unlock()
		return
	}
	lost := r.releaseLocked(s, nil)
	s.gone = true
	r.subs = removeSub(r.subs, s)
	if s.waiting {
		// Parked by a Receive that gave up (its ctx ended) or is still
		// waiting: the next publish would unpark it, but on a quiet ring
		// that may never come, and subscribers that leave must not pile up.
		s.waiting = false
		r.waiting = removeSub(r.waiting, s)
	}
	s.signal()
	r.mu.Unlock()
	for _, t := range lost {
		t.Drop(ErrDeliveryDropped)
	}
}

// removeSub returns subs without s, keeping the order of the others and
// clearing the slot it frees so the slice does not keep s reachable.
func removeSub[T any](subs []*ringSub[T], s *ringSub[T]) []*ringSub[T] {
	for i, x := range subs {
		if x == s {
			copy(subs[i:], subs[i+1:])
			subs[len(subs)-1] = nil
			return subs[:len(subs)-1]
		}
	}
	return subs
}
