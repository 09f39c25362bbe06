package topic

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/internal/goexit"
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
	// Acked means the recipients acked (the first one under ack_mode first, every
	// eligible broadcast subscriber under ack_mode all).
	Acked ReceiptOutcome = iota + 1
	// Nacked means a recipient nacked, dropped the delivery, or there was no
	// recipient. Result.Reason says why.
	Nacked
	// TimedOut means there was no outcome within the publisher's timeout.
	TimedOut
	// TopicClosed means the topic (or the tracked publisher) was closed first.
	TopicClosed
)

var receiptOutcomeNames = []string{"", "acked", "nacked", "timed_out", "topic_closed"}

// String returns "acked", "nacked", "timed_out" or "topic_closed".
func (o ReceiptOutcome) String() string {
	return enumString(receiptOutcomeNames, int(o), "ReceiptOutcome")
}

// Result is the terminal outcome of a tracked publish.
type Result struct {
	// Outcome is how the publish ended: Acked, Nacked, TimedOut or
	// TopicClosed.
	Outcome ReceiptOutcome
	// Reason is the nack reason for Nacked (the subscriber's error,
	// ErrNacked, ErrDeliveryDropped, ErrLagged or ErrNoSubscribers), and
	// ErrTopicClosed or ErrPublisherClosed for TopicClosed; nil otherwise.
	Reason error
}

// Receipt is the pending outcome of one tracked publish. The tracked
// publishers make them: a zero Receipt, declared with var, has no publish
// behind it, so its Wait returns an error wrapping [ErrNotCreated] at once,
// its Result reports no outcome and its Done channel is never closed.
type Receipt struct {
	done chan struct{}
	res  Result
}

// Done is closed once the outcome is known.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Wait blocks until the outcome is known and returns it, or returns ctx.Err()
// if ctx is done first (the publish stays pending), or, on a zero Receipt,
// an error wrapping ErrNotCreated. A nil ctx returns ErrNilContext.
func (r *Receipt) Wait(ctx context.Context) (Result, error) {
	if r.done == nil {
		return Result{}, errZeroReceipt
	}
	if ctx == nil {
		return Result{}, ErrNilContext
	}
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
// nil Ticket (an untracked publish). Each delivery of a publish is reported
// at most once: acked or nacked through its subscription, or dropped.
//
// On the in-memory backend, a ticket reporting through a callback
// (PublishFunc, TryPublishFunc) is recycled for a later publish once
// nothing can report on it any more: its publish has returned, its outcome
// has been delivered, and every delivery the backend made has been
// reported. Other backends' tickets are never recycled: a backend with
// [FeatureDurable] delivers a nacked message again, carrying the ticket it
// was published with, and that delivery was not counted by
// [Ticket.SetRecipients], so an ack of it must not find the ticket serving
// a later publish. Its generation (the high
// half of word) changes when it is recycled, and the timeout goroutine and
// Close, which find tickets on the deadline list rather than through a
// delivery, settle a ticket only in the generation they found it in: a
// stale timeout for a recycled ticket is ignored. A ticket behind a
// Receipt is never recycled, since its holder may keep the receipt.
//
// Only a tracked publisher makes tickets. A zero Ticket, like a nil one,
// stands for an untracked publish: SetRecipients and Drop do nothing.
type Ticket struct {
	core *trackerCore
	// word is the generation (high 32 bits) and the state (low 32 bits:
	// ticketPending, ticketResolved, ticketCancelled, ticketFree).
	word atomic.Uint64
	// refs counts what may still touch the ticket: the publishing call
	// until it returns, the outcome until it is delivered, and each
	// delivery until it is reported. The ticket is recycled at zero.
	refs       atomic.Int32
	remaining  atomic.Int32 // acks still needed under ack_mode all
	recipients int32        // set by the backend during the publish call
	deadline   time.Time
	prev, next *Ticket // in core's timeout list (or free list), guarded by core.mu
	linked     bool    // on the timeout list; guarded by core.mu
	done       func(Result)
	rc         Receipt
}

const (
	ticketPending uint32 = iota
	ticketResolved
	ticketCancelled
	ticketFree // on the core's free list
)

// state is the ticket's state, without its generation.
func (t *Ticket) state() uint32 { return uint32(t.word.Load()) }

// release drops one of the ticket's references and recycles it when that
// was the last one.
func (t *Ticket) release() {
	if t.refs.Add(-1) == 0 && t.done != nil && t.core.reuse {
		t.core.recycle(t)
	}
}

// SetRecipients records how many deliveries the publish makes. The backend
// calls it during Publish/TryPublish, on the publishing goroutine, before
// any subscriber can receive the envelope. Zero recipients resolve the
// publish as Nacked with ErrNoSubscribers once the publish returns.
func (t *Ticket) SetRecipients(n int) {
	if t == nil || t.core == nil {
		return
	}
	// A backend may set the count again when it retries the publish:
	// only the last count is references.
	t.refs.Add(int32(n) - t.recipients)
	t.recipients = int32(n)
	t.remaining.Store(int32(n))
}

// Drop reports that one delivery of the publish was lost before a subscriber
// acked it; it nacks the publish with reason (if still pending). The backend
// must not hold its locks while calling it.
func (t *Ticket) Drop(reason error) {
	if t == nil || t.core == nil {
		return
	}
	t.resolve(Result{Outcome: Nacked, Reason: reason})
	t.release()
}

// ack applies one recipient's ack. It returns false if the publish was
// already settled.
func (t *Ticket) ack() bool {
	defer t.release()
	if t.state() != ticketPending {
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
	defer t.release()
	if reason == nil {
		reason = ErrNacked
	}
	return t.resolve(Result{Outcome: Nacked, Reason: reason})
}

// resolve settles the publish once; later calls return false. The caller
// holds a reference, so the ticket is in the generation it means.
func (t *Ticket) resolve(r Result) bool {
	return t.resolveFrom(t.word.Load(), r)
}

// resolveFrom settles the publish if the ticket is still pending in the
// generation of w, a value of t.word read earlier; otherwise (settled, or
// recycled since) it does nothing and returns false.
func (t *Ticket) resolveFrom(w uint64, r Result) bool {
	if uint32(w) != ticketPending || !t.word.CompareAndSwap(w, w&^0xffffffff|uint64(ticketResolved)) {
		return false
	}
	// The outcome's reference keeps the ticket from being recycled until
	// done has returned.
	t.core.finish(t)
	if t.done != nil {
		t.core.report(t.done, r)
	} else {
		t.rc.res = r
		close(t.rc.done)
	}
	t.release()
	return true
}

// trackerCore is the untyped part of a tracked publisher: the in-flight
// bound, the deadline-ordered list of pending tickets and the one goroutine
// that times them out.
type trackerCore struct {
	all      bool
	reuse    bool // recycle callback tickets: every delivery is counted
	timeout  time.Duration
	sem      chan struct{} // one token per in-flight publish
	inFlight *atomic.Int64 // the topic's counter
	topic    Name          // what a panic of a done callback is logged with
	log      *slog.Logger
	// The lines of done callbacks that panicked (panicked) or ended the
	// timeout goroutine (exited) or the closing one (exitedClosing), each
	// kind kept to one line per FailureLogInterval.
	panicked, exited, exitedClosing logburst.Kind

	mu         sync.Mutex
	head, tail *Ticket
	closed     bool
	closeErr   error   // what publishing returns after close
	free       *Ticket // recycled tickets, linked through next
	nfree      int
	kick       chan struct{} // wakes run when the list becomes non-empty
	// life ends when close starts; stop is its Done channel. A publish
	// waiting for room stops waiting then (see TrackedPublisher.send).
	life      context.Context
	endLife   context.CancelFunc
	stop      <-chan struct{}
	closeDone chan struct{} // closed when close has resolved everything
	wg        sync.WaitGroup
}

// newTrackerCore starts a tracked publisher's core. reuse recycles its
// callback tickets, which is safe only on a backend that never delivers a
// message more often than it told SetRecipients. A done callback that
// panics or ends its goroutine is logged to log, naming topic, like lines
// held back for failureEvery after one is logged (zero:
// DefaultFailureLogInterval; negative: every line logged).
func newTrackerCore(all, reuse bool, maxInFlight int, timeout time.Duration, inFlight *atomic.Int64, topic Name, log *slog.Logger, failureEvery time.Duration) *trackerCore {
	if failureEvery == 0 {
		failureEvery = DefaultFailureLogInterval
	}
	c := &trackerCore{
		all:           all,
		reuse:         reuse,
		timeout:       timeout,
		sem:           make(chan struct{}, maxInFlight),
		inFlight:      inFlight,
		topic:         topic,
		log:           log,
		panicked:      logburst.NewKind(failureEvery, slog.LevelError, donePanicked),
		exited:        logburst.NewKind(failureEvery, slog.LevelError, doneExited),
		exitedClosing: logburst.NewKind(failureEvery, slog.LevelError, doneExitedClosing),
		kick:          make(chan struct{}, 1),
		closeDone:     make(chan struct{}),
	}
	c.life, c.endLife = context.WithCancel(context.Background())
	c.stop = c.life.Done()
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
	var t *Ticket
	if done != nil && c.free != nil {
		t = c.free
		c.free, t.next = t.next, nil
		c.nfree--
		t.word.Store(t.word.Load()&^0xffffffff | uint64(ticketPending))
	}
	c.mu.Unlock()
	if t == nil {
		t = &Ticket{core: c}
	}
	// The publishing call's reference and the outcome's.
	t.refs.Store(2)
	if done != nil {
		t.done = done
	} else {
		t.rc.done = make(chan struct{})
	}
	c.inFlight.Add(1)
	return t, true, nil
}

// donePanicked is the message a tracked publisher logs a panic of a done
// callback with.
const donePanicked = "tracked publish: done callback panicked; the publish stays settled with the outcome it was given"

// report calls done with r. A panic in done is contained: it is logged at
// error level, with the topic, the outcome, the panic as a
// *message.PanicError and its stack, unless a like line was logged less
// than FailureLogInterval ago (then it is only counted, see
// logburst.Kind), and report returns as if done had, so that whatever
// settled the publish (a subscriber's Ack or Nack, the timeout goroutine,
// Close) goes on.
func (c *trackerCore) report(done func(Result), r Result) {
	defer c.recoverDone(r.Outcome)
	done(r)
}

// recoverDone, deferred by report, recovers and logs a panic of done.
func (c *trackerCore) recoverDone(o ReceiptOutcome) {
	if v := recover(); v != nil {
		err := &message.PanicError{Value: v, Stack: debug.Stack()}
		c.panicked.Line(context.Background(), c.log, slog.String("topic", string(c.topic)), slog.String("outcome", o.String()),
			slog.Any("error", err), slog.String("stack", string(err.Stack)))
	}
}

// recycle puts t, which nothing references any more, on the free list in
// a new generation, unless the list already holds as many tickets as may
// be in flight.
func (c *trackerCore) recycle(t *Ticket) {
	gen := t.word.Load()>>32 + 1
	t.word.Store(gen<<32 | uint64(ticketFree))
	t.done = nil
	t.recipients = 0
	t.remaining.Store(0)
	t.deadline = time.Time{}
	c.mu.Lock()
	if c.nfree < cap(c.sem) {
		t.next = c.free
		c.free = t
		c.nfree++
	}
	c.mu.Unlock()
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
	if t.state() != ticketPending {
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
	w := t.word.Load()
	if uint32(w) == ticketPending && t.word.CompareAndSwap(w, w&^0xffffffff|uint64(ticketCancelled)) {
		c.finish(t)
		t.release() // the outcome's reference: there is none to deliver
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
// A done callback that ends the goroutine (runtime.Goexit, as t.FailNow
// does) as it is told of a timeout ends it there: the exit is logged at
// error level, with the stack (like exits held back, see report), and
// the timeouts go on on a new goroutine, which Close waits for.
func (c *trackerCore) run() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	c.settleResuming(&c.exited, TimedOut, func(timingOut **Ticket) { c.timeOuts(timer, timingOut) })
}

// settleResuming runs loop, which settles publishes as o, setting
// *settling to the one whose done it calls and back to nil after. Done
// panics are recovered (report), so an end of the goroutine while it is
// set is an exit of done (runtime.Goexit): it is logged as a line of
// kind, with the outcome and the stack (or counted, see report), and loop
// goes on on a new goroutine, which the ending one waits for.
func (c *trackerCore) settleResuming(kind *logburst.Kind, o ReceiptOutcome, loop func(settling **Ticket)) {
	var settling *Ticket
	goexit.Resume(func() { loop(&settling) }, func(stack string) bool {
		t := settling
		if t == nil {
			return false
		}
		settling = nil
		t.release() // resolveFrom's, which the exit skipped
		kind.Line(context.Background(), c.log, slog.String("topic", string(c.topic)), slog.String("outcome", o.String()),
			slog.Any("error", message.ErrHandlerExited), slog.String("stack", stack))
		return true
	})
}

// doneExited is the message a tracked publisher logs an exit of a done
// callback (runtime.Goexit) on its timeout goroutine with.
const doneExited = "tracked publish: done callback ended the timeout goroutine (runtime.Goexit); the publish stays settled and the timeouts go on"

// timeOuts is run's loop: it returns when the core stops.
func (c *trackerCore) timeOuts(timer *time.Timer, timingOut **Ticket) {
	for {
		c.mu.Lock()
		t := c.head
		var wait time.Duration
		var w uint64
		if t != nil {
			wait = time.Until(t.deadline)
			w = t.word.Load()
		}
		c.mu.Unlock()
		if t != nil && wait <= 0 {
			*timingOut = t
			t.resolveFrom(w, Result{Outcome: TimedOut})
			*timingOut = nil
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
// with reason, which later publishes return, then logs the lines of done
// callbacks still held back. Idempotent: a second call returns once the
// first has finished.
func (c *trackerCore) close(reason error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.closeDone
		return
	}
	c.closed = true
	c.closeErr = reason
	c.endLife()
	c.mu.Unlock()
	defer close(c.closeDone)
	// Deferred, so that it runs, before closeDone is closed, even when a
	// done callback ends the closing goroutine.
	defer c.flushFailureLines()
	c.wg.Wait()
	c.settleResuming(&c.exitedClosing, TopicClosed, func(closing **Ticket) { c.closePending(reason, closing) })
}

// doneExitedClosing is the message a tracked publisher logs an exit of a
// done callback (runtime.Goexit) on the goroutine closing it with.
const doneExitedClosing = "tracked publish: done callback ended the goroutine closing the publisher (runtime.Goexit); the publish stays settled and the closing goes on"

// flushFailureLines logs, one line per kind, the lines of done callbacks
// held back since the last line of their kind (the kind's message followed
// by logburst.HeldBackSuffix, the topic and their count as
// logburst.HeldBackKey).
func (c *trackerCore) flushFailureLines() {
	for _, k := range []*logburst.Kind{&c.panicked, &c.exited, &c.exitedClosing} {
		k.Flush(context.Background(), c.log, k.Level, k.Msg+logburst.HeldBackSuffix, slog.String("topic", string(c.topic)))
	}
}

// closePending is close's loop: it resolves every pending ticket as
// TopicClosed with reason. A done callback that ends the goroutine
// (runtime.Goexit) ends it there: close logs the exit and goes on with
// the loop on a new goroutine, which the ending one waits for.
func (c *trackerCore) closePending(reason error, closing **Ticket) {
	for {
		c.mu.Lock()
		t := c.head
		var w uint64
		if t != nil {
			w = t.word.Load()
		}
		c.mu.Unlock()
		if t == nil {
			return
		}
		*closing = t
		settled := t.resolveFrom(w, Result{Outcome: TopicClosed, Reason: reason})
		*closing = nil
		if !settled {
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
// which times publishes out; Close (or closing the topic) stops it. Make
// one with [Handle.Tracked] (or [Binding.Tracked]): a zero TrackedPublisher
// belongs to no topic, so its publish methods return an error wrapping
// [ErrNotCreated], InFlight is 0 and Close does nothing.
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
// A nil ctx returns ErrNilContext, nothing published and no in-flight slot
// taken; so do PublishHeaders, PublishFunc and PublishFuncHeaders.
func (p *TrackedPublisher[T]) Publish(ctx context.Context, v T) (*Receipt, error) {
	return p.PublishHeaders(ctx, v, nil)
}

// PublishHeaders is Publish with headers: every recipient receives hdr with
// the message, in [Item.Headers] (see [Handle.PublishWithHeaders]). A nil
// hdr publishes exactly as Publish does.
func (p *TrackedPublisher[T]) PublishHeaders(ctx context.Context, v T, hdr Headers) (*Receipt, error) {
	t, err := p.publish(ctx, v, hdr, nil)
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
// PublishFunc returns an error. A panic in done is recovered and logged
// at error level, with its stack, to TrackedOptions.Logger: the publish
// stays settled with the outcome done was given, and the goroutine that
// called done goes on. A done that panics on every publish costs a few
// lines, not one per publish: like panics within
// TrackedOptions.FailureLogInterval of a line are only counted, the next
// line says how many (held_back), and Close logs what is still held
// back. A done that ends its goroutine (runtime.Goexit, as
// t.FailNow does) as it is told of a timeout is logged the same way, and
// later publishes still time out; one that does so as Close tells it its
// publish is closed is logged the same way, and ends the goroutine that
// called Close only once Close has settled every other pending publish.
func (p *TrackedPublisher[T]) PublishFunc(ctx context.Context, v T, done func(Result)) error {
	_, err := p.publish(ctx, v, nil, done)
	return err
}

// PublishFuncHeaders is PublishFunc with headers, as PublishHeaders is
// Publish with headers.
func (p *TrackedPublisher[T]) PublishFuncHeaders(ctx context.Context, v T, hdr Headers, done func(Result)) error {
	_, err := p.publish(ctx, v, hdr, done)
	return err
}

// TryPublish is Publish without waiting: it returns nil and
// MaxInFlightReached when MaxInFlight publishes are pending, nil and
// DroppedOnFull when a balanced group queue is full, or the receipt and
// Published. It waits for a broker's answer as [Handle.TryPublish] does.
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

func (p *TrackedPublisher[T]) publish(ctx context.Context, v T, hdr Headers, done func(Result)) (*Ticket, error) {
	if p.core == nil {
		return nil, errZeroTracked
	}
	if ctx == nil {
		return nil, ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, _, err := p.core.begin(ctx, true, done)
	if err != nil {
		return nil, err
	}
	out, err := p.send(ctx, Envelope[T]{ID: p.h.nextID(), Value: v, Headers: hdr, Ticket: t})
	if err == nil && out == DroppedOnFull {
		err = ErrDroppedOnFull
	}
	if err != nil {
		p.core.cancel(t)
		t.release()
		return nil, err
	}
	p.settle(t)
	t.release()
	return t, nil
}

// send publishes e with the publisher's OnFull. On the in-memory backend
// a publish that has to wait for room also stops waiting when the
// publisher is closed, and then returns its close error: it tries without
// waiting first, so only a publish that does wait pays for watching the
// publisher (a context and a callback).
func (p *TrackedPublisher[T]) send(ctx context.Context, e Envelope[T]) (PublishOutcome, error) {
	h := p.h
	if h.mem == nil || p.onFull != Block {
		return h.publishEnvelope(ctx, e, p.onFull, false)
	}
	out, err := h.mem.publish(ctx, e, true)
	if err == nil && out == DroppedOnFull {
		wctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(p.core.life, cancel)
		out, err = h.mem.publish(wctx, e, false)
		stop()
		cancel()
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			// Only the publisher's close cancels wctx without ctx.
			p.core.mu.Lock()
			err = p.core.closeErr
			p.core.mu.Unlock()
		}
	}
	if err != nil || out != Published {
		h.unpublished.Add(1)
	}
	return out, err
}

func (p *TrackedPublisher[T]) try(v T, done func(Result)) (*Ticket, PublishOutcome, error) {
	if p.core == nil {
		return nil, 0, errZeroTracked
	}
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
		t.release()
		return nil, out, err
	}
	p.settle(t)
	t.release()
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
func (p *TrackedPublisher[T]) InFlight() int {
	if p.core == nil {
		return 0
	}
	return len(p.core.sem)
}

// Close stops the publisher: later publishes return ErrPublisherClosed (or
// ErrTopicClosed if the topic was closed first) and
// every unresolved receipt resolves as TopicClosed with reason
// ErrPublisherClosed. On the in-memory backend a Publish (or PublishFunc)
// waiting for an in-flight slot or for room in a full group stops waiting
// and returns that error too, with nothing published. It waits for the
// publisher's goroutine, and calls the done callbacks of the publishes it
// resolves on the calling goroutine: it returns as soon as they do, and
// they must not block (see [TrackedPublisher.PublishFunc]). Idempotent;
// every call returns only once all of that is done.
func (p *TrackedPublisher[T]) Close() {
	if p.core == nil {
		return
	}
	p.h.detachTracker(p.core)
	p.core.close(ErrPublisherClosed)
}
