package topic

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNacked is the Reason of a Nack whose subscriber gave no reason.
var ErrNacked = errors.New("topic: nacked by subscriber")

// ErrDroppedOnFull is returned by [Handle.Publish] (topic on_full
// drop_newest), [TrackedPublisher.Publish] and [TrackedPublisher.PublishFunc]
// (publisher OnFull DropNewest) when a balanced group queue was full:
// nothing was published (and no receipt exists).
var ErrDroppedOnFull = errors.New("topic: dropped on full")

// ReceiptOutcome is the terminal outcome of a tracked publish.
type ReceiptOutcome int

const (
	// Acked: the recipients acked (the first one under ack_mode first, every
	// eligible broadcast subscriber under ack_mode all).
	Acked ReceiptOutcome = iota + 1
	// Nacked: a recipient nacked, dropped the delivery, or there was no
	// recipient. Result.Reason says why.
	Nacked
	// TimedOut: no outcome within the publisher's timeout.
	TimedOut
	// TopicClosed: the topic (or the tracked publisher) was closed first.
	TopicClosed
)

var receiptOutcomeNames = []string{"", "acked", "nacked", "timed_out", "topic_closed"}

// String returns "acked", "nacked", "timed_out" or "topic_closed".
func (o ReceiptOutcome) String() string {
	return enumString(receiptOutcomeNames, int(o), "ReceiptOutcome")
}

// Result is the terminal outcome of a tracked publish.
type Result struct {
	Outcome ReceiptOutcome
	// Reason is the nack reason for Nacked (the subscriber's error,
	// ErrNacked, ErrDeliveryDropped, ErrLagged or ErrNoSubscribers), and
	// ErrTopicClosed or ErrPublisherClosed for TopicClosed; nil otherwise.
	Reason error
}

// Receipt is the pending outcome of one tracked publish.
type Receipt struct {
	done chan struct{}
	res  Result
}

// Done is closed once the outcome is known.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Wait blocks until the outcome is known and returns it, or returns ctx.Err()
// if ctx is done first (the publish stays pending).
func (r *Receipt) Wait(ctx context.Context) (Result, error) {
	select {
	case <-r.done:
		return r.res, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Result returns the outcome and true once it is known, else false.
func (r *Receipt) Result() (Result, bool) {
	select {
	case <-r.done:
		return r.res, true
	default:
		return Result{}, false
	}
}

// Ticket carries the outcome of one tracked publish through a backend. A
// backend only calls [Ticket.SetRecipients] and [Ticket.Drop]; both accept a
// nil Ticket (an untracked publish).
type Ticket struct {
	core       *trackerCore
	state      atomic.Uint32 // ticketPending, ticketResolved, ticketCancelled
	remaining  atomic.Int32  // acks still needed under ack_mode all
	recipients int32         // set by the backend during the publish call
	deadline   time.Time
	prev, next *Ticket // in core's timeout list, guarded by core.mu
	linked     bool    // on that list; guarded by core.mu
	done       func(Result)
	rc         Receipt
}

const (
	ticketPending uint32 = iota
	ticketResolved
	ticketCancelled
)

// SetRecipients records how many deliveries the publish makes. The backend
// calls it during Publish/TryPublish, on the publishing goroutine, before
// any subscriber can receive the envelope. Zero recipients resolve the
// publish as Nacked with ErrNoSubscribers once the publish returns.
func (t *Ticket) SetRecipients(n int) {
	if t == nil {
		return
	}
	t.recipients = int32(n)
	t.remaining.Store(int32(n))
}

// Drop reports that one delivery of the publish was lost before a subscriber
// acked it; it nacks the publish with reason (if still pending). The backend
// must not hold its locks while calling it.
func (t *Ticket) Drop(reason error) {
	if t == nil {
		return
	}
	t.resolve(Result{Outcome: Nacked, Reason: reason})
}

// ack applies one recipient's ack. It returns false if the publish was
// already settled.
func (t *Ticket) ack() bool {
	if t.state.Load() != ticketPending {
		return false
	}
	if t.core.all {
		if t.remaining.Add(-1) == 0 {
			t.resolve(Result{Outcome: Acked})
		}
		return true
	}
	return t.resolve(Result{Outcome: Acked})
}

// nack applies one recipient's nack. It returns false if the publish was
// already settled.
func (t *Ticket) nack(reason error) bool {
	if reason == nil {
		reason = ErrNacked
	}
	return t.resolve(Result{Outcome: Nacked, Reason: reason})
}

// resolve settles the publish once; later calls return false.
func (t *Ticket) resolve(r Result) bool {
	if !t.state.CompareAndSwap(ticketPending, ticketResolved) {
		return false
	}
	t.core.finish(t)
	if t.done != nil {
		t.done(r)
	} else {
		t.rc.res = r
		close(t.rc.done)
	}
	return true
}

// trackerCore is the untyped part of a tracked publisher: the in-flight
// bound, the deadline-ordered list of pending tickets and the one goroutine
// that times them out.
type trackerCore struct {
	all      bool
	timeout  time.Duration
	sem      chan struct{} // one token per in-flight publish
	inFlight *atomic.Int64 // the topic's counter

	mu         sync.Mutex
	head, tail *Ticket
	closed     bool
	closeErr   error         // what publishing returns after close
	kick       chan struct{} // wakes run when the list becomes non-empty
	stop       chan struct{}
	closeDone  chan struct{} // closed when close has resolved everything
	wg         sync.WaitGroup
}

func newTrackerCore(all bool, maxInFlight int, timeout time.Duration, inFlight *atomic.Int64) *trackerCore {
	c := &trackerCore{
		all:       all,
		timeout:   timeout,
		sem:       make(chan struct{}, maxInFlight),
		inFlight:  inFlight,
		kick:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		closeDone: make(chan struct{}),
	}
	c.wg.Add(1)
	go c.run()
	return c
}

// begin reserves an in-flight slot (waiting if wait, else reporting false)
// and returns a pending ticket, not yet on the timeout list: the timeout
// runs from the moment the message is published, not while the publish
// waits for room (ctx bounds that).
func (c *trackerCore) begin(ctx context.Context, wait bool, done func(Result)) (*Ticket, bool, error) {
	select {
	case c.sem <- struct{}{}:
	default:
		if !wait {
			c.mu.Lock()
			closed, cerr := c.closed, c.closeErr
			c.mu.Unlock()
			if closed {
				return nil, false, cerr
			}
			return nil, false, nil
		}
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-c.stop:
			c.mu.Lock()
			cerr := c.closeErr
			c.mu.Unlock()
			return nil, false, cerr
		}
	}
	c.mu.Lock()
	if c.closed {
		cerr := c.closeErr
		c.mu.Unlock()
		<-c.sem
		return nil, false, cerr
	}
	c.mu.Unlock()
	t := &Ticket{core: c}
	if done != nil {
		t.done = done
	} else {
		t.rc.done = make(chan struct{})
	}
	c.inFlight.Add(1)
	return t, true, nil
}

// published starts the timeout of a ticket whose message was published: it
// appends it to the deadline-ordered list, unless it is already settled. If
// the core was closed meanwhile, it settles it as TopicClosed.
func (c *trackerCore) published(t *Ticket) {
	c.mu.Lock()
	if c.closed {
		cerr := c.closeErr
		c.mu.Unlock()
		t.resolve(Result{Outcome: TopicClosed, Reason: cerr})
		return
	}
	if t.state.Load() != ticketPending {
		c.mu.Unlock()
		return
	}
	t.deadline = time.Now().Add(c.timeout)
	wasEmpty := c.head == nil
	t.linked = true
	t.prev = c.tail
	if c.tail != nil {
		c.tail.next = t
	} else {
		c.head = t
	}
	c.tail = t
	c.mu.Unlock()
	if wasEmpty {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// cancel withdraws a ticket whose publish did not happen.
func (c *trackerCore) cancel(t *Ticket) {
	if t.state.CompareAndSwap(ticketPending, ticketCancelled) {
		c.finish(t)
	}
}

// finish unlinks a settled ticket and frees its slot.
func (c *trackerCore) finish(t *Ticket) {
	c.mu.Lock()
	if t.linked {
		if t.prev != nil {
			t.prev.next = t.next
		} else {
			c.head = t.next
		}
		if t.next != nil {
			t.next.prev = t.prev
		} else {
			c.tail = t.prev
		}
		t.prev, t.next = nil, nil
		t.linked = false
	}
	c.mu.Unlock()
	c.inFlight.Add(-1)
	<-c.sem
}

// run times out pending tickets in deadline order (all tickets of one core
// share the timeout, so the list is sorted by deadline).
func (c *trackerCore) run() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c.mu.Lock()
		t := c.head
		var wait time.Duration
		if t != nil {
			wait = time.Until(t.deadline)
		}
		c.mu.Unlock()
		if t != nil && wait <= 0 {
			t.resolve(Result{Outcome: TimedOut})
			continue
		}
		var fire <-chan time.Time
		if t != nil {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-c.stop:
			timer.Stop()
			return
		case <-c.kick:
			timer.Stop()
		case <-fire:
		}
	}
}

// close stops the core and resolves every pending ticket as TopicClosed
// with reason, which later publishes return. Idempotent: a second call
// returns once the first has finished.
func (c *trackerCore) close(reason error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.closeDone
		return
	}
	c.closed = true
	c.closeErr = reason
	close(c.stop)
	c.mu.Unlock()
	defer close(c.closeDone)
	c.wg.Wait()
	for {
		c.mu.Lock()
		t := c.head
		c.mu.Unlock()
		if t == nil {
			return
		}
		if !t.resolve(Result{Outcome: TopicClosed, Reason: reason}) {
			// Settled concurrently; its resolver unlinks it. Yield the lock
			// order by re-reading.
			c.waitUnlinked(t)
		}
	}
}

// waitUnlinked spins until a ticket settled by another goroutine has left
// the list (finish runs right after the state change).
func (c *trackerCore) waitUnlinked(t *Ticket) {
	for {
		c.mu.Lock()
		still := c.head == t
		c.mu.Unlock()
		if !still {
			return
		}
		runtime.Gosched()
	}
}

// TrackedPublisher publishes into a topic and reports each publish's
// terminal outcome (Acked, Nacked, TimedOut or TopicClosed). At most
// MaxInFlight publishes are unresolved at a time. It owns one goroutine,
// which times publishes out; Close (or closing the topic) stops it.
type TrackedPublisher[T any] struct {
	h      *Handle[T]
	core   *trackerCore
	onFull OnFull
}

// Publish publishes v and returns its receipt. It waits for an in-flight
// slot and, with OnFull Block, for room in the balanced groups. It returns
// ctx.Err(), ErrTopicClosed (topic closed), ErrPublisherClosed (publisher
// closed), or ErrDroppedOnFull (OnFull
// DropNewest and a group queue was full); nothing was published then.
func (p *TrackedPublisher[T]) Publish(ctx context.Context, v T) (*Receipt, error) {
	t, err := p.publish(ctx, v, nil, true)
	if t == nil {
		return nil, err
	}
	return &t.rc, err
}

// PublishFunc is Publish reporting the outcome by calling done exactly once
// (from whichever goroutine settles it: a subscriber's Ack/Nack, the timeout
// goroutine, Close), instead of through a Receipt. done must not block, and
// must not close the publisher or its topic (closing waits for the timeout
// goroutine, which may be the one running done). It is not called when
// PublishFunc returns an error.
func (p *TrackedPublisher[T]) PublishFunc(ctx context.Context, v T, done func(Result)) error {
	_, err := p.publish(ctx, v, done, true)
	return err
}

// TryPublish is Publish without waiting: it returns nil and
// MaxInFlightReached when MaxInFlight publishes are pending, nil and
// DroppedOnFull when a balanced group queue is full, or the receipt and
// Published.
func (p *TrackedPublisher[T]) TryPublish(v T) (*Receipt, PublishOutcome, error) {
	t, out, err := p.try(v, nil)
	if t == nil {
		return nil, out, err
	}
	return &t.rc, out, err
}

// TryPublishFunc is TryPublish reporting through done (see PublishFunc); done
// is called only when the outcome is Published.
func (p *TrackedPublisher[T]) TryPublishFunc(v T, done func(Result)) (PublishOutcome, error) {
	_, out, err := p.try(v, done)
	return out, err
}

func (p *TrackedPublisher[T]) publish(ctx context.Context, v T, done func(Result), wait bool) (*Ticket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, _, err := p.core.begin(ctx, wait, done)
	if err != nil {
		return nil, err
	}
	out, err := p.h.publishEnvelope(ctx, Envelope[T]{ID: p.h.nextID(), Value: v, Ticket: t}, p.onFull, false)
	if err == nil && out == DroppedOnFull {
		err = ErrDroppedOnFull
	}
	if err != nil {
		p.core.cancel(t)
		return nil, err
	}
	p.settle(t)
	return t, nil
}

func (p *TrackedPublisher[T]) try(v T, done func(Result)) (*Ticket, PublishOutcome, error) {
	t, ok, err := p.core.begin(context.Background(), false, done)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, MaxInFlightReached, nil
	}
	out, err := p.h.publishEnvelope(context.Background(), Envelope[T]{ID: p.h.nextID(), Value: v, Ticket: t}, DropNewest, true)
	if err != nil || out != Published {
		p.core.cancel(t)
		return nil, out, err
	}
	p.settle(t)
	return t, Published, nil
}

// settle follows a successful publish: one that reached nobody is nacked at
// once, others start their timeout.
func (p *TrackedPublisher[T]) settle(t *Ticket) {
	if t.recipients == 0 {
		t.resolve(Result{Outcome: Nacked, Reason: ErrNoSubscribers})
		return
	}
	p.core.published(t)
}

// InFlight returns the number of unresolved publishes.
func (p *TrackedPublisher[T]) InFlight() int { return len(p.core.sem) }

// Close stops the publisher: later publishes return ErrPublisherClosed (or
// ErrTopicClosed if the topic was closed first) and
// every unresolved receipt resolves as TopicClosed with reason
// ErrPublisherClosed. It waits for the publisher's goroutine. Idempotent;
// every call returns only once all of that is done.
func (p *TrackedPublisher[T]) Close() {
	p.h.detachTracker(p.core)
	p.core.close(ErrPublisherClosed)
}
