package pulsar

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// slabSize is how many messages (and their metadata) are allocated at once.
const slabSize = 64

// consumer is one pulsar-client-go consumer of one producer stage, and the
// acknowledger of the messages it delivered.
type consumer struct {
	src   *Source
	stage int
	topic string // as configured
	name  string
	c     pulsar.Consumer
	ch    chan pulsar.ConsumerMessage
	log   *slog.Logger

	// gone is set when the consumer was closed (replaced after a failure,
	// or by Close): acknowledgements for its messages are dropped.
	gone      atomic.Bool
	closeOnce sync.Once
	// call is held by the prober for the length of its client call, and by
	// close while it closes the consumer, which so never closes it under a
	// call that may not have reached the client yet (see askClient).
	call chan struct{}
	// events is the consumer's active-state listener; nil without an
	// ActiveStateCallback.
	events *listener
	seq    uint64 // receive goroutine only

	// plan sizes the client's queue and the reserve the gate counts.
	plan queuePlan
	// permits are the feed's grants the source has not spent yet.
	permits atomic.Int64
	// wake is signalled by a grant and by an acknowledgement (a message
	// left the stage, so the gate may have room again).
	wake chan struct{}
	// taken counts the messages the source took from the client (receive
	// goroutine only).
	taken int
}

// grant is the feed's grant callback: the stage calls it with new permits.
func (c *consumer) grant(n int) {
	c.permits.Add(int64(n))
	c.src.granted.Add(int64(n))
	c.signal()
}

// signal wakes a receive loop waiting for permits or room.
func (c *consumer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// receive moves messages from the client to the stage, never more than the
// feed has granted and never more than leaves the broker's side of the
// window room for (see queuePlan): the client refills the broker as the
// source takes messages, and the source takes them only as fast as the
// stage dispatches them.
func (c *consumer) receive(ctx context.Context, feed *producer.Feed[[]byte], maxTake int) error {
	var (
		buf  = make([]*message.Message[[]byte], 0, slabSize)
		msgs []message.Message[[]byte]
		mds  []Metadata
	)
	flush := func() {
		if len(buf) > 0 {
			feed.Deliver(buf...)
			c.src.received.Add(int64(len(buf)))
			clear(buf)
			buf = buf[:0]
		}
	}
	// On the way out (the stage is stopping) what was taken still goes to
	// the stage, to be handled by the drain. Not when the consumer was
	// closed: those messages could no longer be acked, and the broker
	// redelivers them anyway.
	closed := false
	defer func() {
		if !closed {
			flush()
		}
	}()
	sub := c.src.opts.Subscription
	var tc topicCache
	for {
		n, gone, err := c.acquire(ctx, feed, maxTake)
		if gone != nil {
			closed = true
			return &ConsumerError{Stage: c.stage, Topic: c.topic, Subscription: sub, Broker: c.src.broker, Kind: ErrConsumerClosed, Err: gone}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for ; n > 0; n-- {
			pm, err := c.next(ctx, len(buf) > 0, flush)
			// Spent before the hand-off is known complete: the client may
			// grant the broker a permit for the next message as soon as it
			// has handed this one over.
			c.permits.Add(-1)
			c.taken++
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				closed = true
				return &ConsumerError{Stage: c.stage, Topic: c.topic, Subscription: sub, Broker: c.src.broker, Kind: ErrConsumerClosed, Err: err}
			}
			if len(msgs) == 0 {
				msgs = make([]message.Message[[]byte], slabSize)
				mds = make([]Metadata, slabSize)
			}
			m, md := &msgs[0], &mds[0]
			msgs, mds = msgs[1:], mds[1:]
			md.fill(pm, sub, &tc)
			if md.RedeliveryCount > 0 {
				c.src.redelivered.Add(1)
			}
			if c.events != nil {
				c.events.received(c.c, pm.Topic())
			}
			c.seq++
			m.Init(pm.Payload(), c, c.seq)
			m.Metadata = md
			// The message itself, not only its id: a nack goes through
			// Consumer.Nack, which applies ConsumerOptions.NackBackoffPolicy
			// (and EnableDefaultNackBackoffPolicy) by its redelivery count;
			// NackID ignores both.
			m.SetAckData(pm)
			buf = append(buf, m)
			if len(buf) == cap(buf) {
				flush()
			}
		}
		flush()
	}
}

// probeInterval is how long a consumer waits for permits before the source
// checks, and then how often it checks again while the wait lasts, that
// the consumer is still open.
const probeInterval = time.Second

// acquire returns how many messages the source may take now (up to
// maxTake): permits the feed granted and the source has not spent, within
// the room the gate leaves (queuePlan). It waits when there are none: for a
// grant, or for an acknowledgement, which tells that messages left the
// stage. A consumer closed under its stage shows only in the client's
// Receive, which the source does not call while it waits: so after
// probeInterval of waiting (the processors are busy and the stage holds the
// window) a prober asks the client for the consumer's last message id, once
// per probeInterval. For a closed consumer the client refuses at once,
// without a request to the broker, and acquire returns that refusal as
// gone. ctx ending is err.
func (c *consumer) acquire(ctx context.Context, feed *producer.Feed[[]byte], maxTake int) (n int, gone, err error) {
	if n := c.ready(feed, maxTake); n > 0 {
		return n, nil, nil
	}
	wait, cancel := context.WithTimeout(ctx, probeInterval)
	n, err = c.await(wait, feed, maxTake)
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return n, nil, err
	}
	probed, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// The prober may be inside a request when the wait ends (bounded by
	// ClientOptions.OperationTimeout); Source.Close waits for it, Run does
	// not.
	c.src.bg.Add(1)
	go func() {
		defer c.src.bg.Done()
		c.probe(probed, stop)
	}()
	n, err = c.await(probed, feed, maxTake)
	if err != nil && ctx.Err() == nil {
		var pe *probeError
		if errors.As(context.Cause(probed), &pe) {
			return 0, pe.err, nil
		}
	}
	return n, nil, err
}

// ready is how many messages the source may take without waiting.
func (c *consumer) ready(feed *producer.Feed[[]byte], maxTake int) int {
	n := min(int(c.permits.Load()), maxTake)
	if n <= 0 {
		return 0
	}
	return min(n, c.plan.room(c.taken-feed.Stats().Dispatched))
}

// await waits until ready is positive, or ctx ends.
func (c *consumer) await(ctx context.Context, feed *producer.Feed[[]byte], maxTake int) (int, error) {
	for {
		if n := c.ready(feed, maxTake); n > 0 {
			return n, nil
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// probeError carries the client's refusal out of the prober.
type probeError struct{ err error }

func (e *probeError) Error() string { return e.err.Error() }

// probe checks at once, then every probeInterval until ctx ends, whether
// the client still considers the consumer open, and cancels ctx with a
// *probeError when it does not. Any other failure (the broker is
// unreachable and the client is reconnecting) is not a closure.
func (c *consumer) probe(ctx context.Context, found context.CancelCauseFunc) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		called, err := c.askClient(ctx)
		if !called {
			return
		}
		if err != nil && (errors.Is(err, errClosed) || closedByClient(err)) {
			found(&probeError{err: err})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// askClient asks the client for the consumer's last message ids, holding
// c.call meanwhile; called is false only when ctx ended first. When the
// source closed the consumer it does not ask and returns errClosed.
// pulsar-client-go queues the request on the consumer's event loop after
// checking that the consumer is open; a close queued between the two ends
// that loop first, and the request then waits for an answer that never
// comes. close waits for the call, so the source's own closes cannot
// strand it.
func (c *consumer) askClient(ctx context.Context) (called bool, err error) {
	select {
	case c.call <- struct{}{}:
	case <-ctx.Done():
		return false, nil
	}
	defer func() { <-c.call }()
	if c.gone.Load() {
		return true, errClosed
	}
	_, err = c.c.GetLastMessageIDs()
	return true, err
}

// errClosed is what the prober finds when the source closed the consumer.
var errClosed = errors.New("consumer closed by the source")

// closedByClient reports whether err is pulsar-client-go's refusal to serve
// a closed or closing consumer (it has no sentinel for it; the phrase is
// the same in every refusal of that kind).
func closedByClient(err error) bool {
	return strings.Contains(err.Error(), "closing or closed consumer")
}

// next returns the consumer's next message. When none is waiting and some
// are buffered, it first lets the client's dispatcher run (it hands messages
// over one at a time), so that deliveries stay batched, then calls flush,
// so that what was taken so far reaches the stage, and waits. It fails when
// ctx ends or the consumer is closed.
func (c *consumer) next(ctx context.Context, buffered bool, flush func()) (pulsar.Message, error) {
	select {
	case cm := <-c.ch:
		return cm.Message, nil
	default:
	}
	if buffered {
		runtime.Gosched()
		select {
		case cm := <-c.ch:
			return cm.Message, nil
		default:
		}
		flush()
	}
	return c.c.Receive(ctx)
}

// Ack acknowledges successful messages, and failed ones per their
// disposition: DispositionDiscard acks, any other nacks (redelivered after
// ConsumerOptions.NackRedeliveryDelay). A failure the pipeline's shutdown
// caused (acker.Interrupted) is neither acked nor nacked, whatever its
// disposition: the message stays unacknowledged and the broker delivers it
// again once the consumer closes, without counting a redelivery against
// it. Outcomes for a consumer that was
// replaced or closed are dropped and logged: the broker redelivers those
// messages to the consumer that replaced it.
func (c *consumer) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	if c.gone.Load() {
		n := len(successful) + len(failed)
		c.src.droppedAcks.Add(int64(n))
		c.log.WarnContext(ctx, "outcomes for messages of a closed or replaced consumer are dropped; the broker redelivers them",
			slog.Int("successful", len(successful)), slog.Int("failed", len(failed)))
		return
	}
	var (
		errs     int
		firstErr error
	)
	ack := func(o *acker.Outcome) {
		pm, ok := o.Data.(pulsar.Message)
		if !ok {
			return
		}
		if err := c.c.AckID(pm.ID()); err != nil {
			errs++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	for i := range successful {
		ack(&successful[i])
	}
	for i := range failed {
		o := &failed[i]
		if acker.Interrupted(*o) {
			continue
		}
		if o.Disposition == acker.DispositionDiscard {
			ack(o)
			continue
		}
		if pm, ok := o.Data.(pulsar.Message); ok {
			c.c.Nack(pm)
			c.src.nacked.Add(1)
		}
	}
	if errs > 0 {
		c.log.WarnContext(ctx, "pulsar acknowledgements failed; the broker redelivers those messages",
			slog.Int("failed_acks", errs), slog.Any("error", firstErr))
	}
	// These messages left the stage: the gate may have room again.
	c.signal()
}

// callWait bounds how long close waits for a prober's call in flight. The
// call queues its request at once and the client answers it before a
// later close (or, when the broker is unreachable, within
// ClientOptions.OperationTimeout); close waits only so long that a call
// not yet queued surely is, and then closes regardless.
const callWait = probeInterval

// close marks the consumer gone and closes it once, after a prober's call
// in flight (see askClient).
func (c *consumer) close() {
	c.closeOnce.Do(func() {
		c.gone.Store(true)
		t := time.NewTimer(callWait)
		defer t.Stop()
		select {
		case c.call <- struct{}{}:
			defer func() { <-c.call }()
		case <-t.C:
		}
		c.c.Close()
	})
}

// listener turns pulsar-client-go's active-consumer events into
// ActiveState reports, and remembers the last state reported per topic (or
// partition) so that the consumer's first message on a topic with no report
// yet can report it active.
type listener struct {
	src   *Source
	stage int
	log   *slog.Logger

	mu     sync.Mutex
	active map[string]bool // topic → last state reported
}

func (l *listener) BecameActive(c pulsar.Consumer, topic string, _ int32) {
	l.set(c, topic, true)
	l.src.report(l.log, l.stage, true, c, topic)
}

func (l *listener) BecameInactive(c pulsar.Consumer, topic string, _ int32) {
	l.set(c, topic, false)
	l.src.report(l.log, l.stage, false, c, topic)
}

func (l *listener) set(_ pulsar.Consumer, topic string, active bool) {
	l.mu.Lock()
	if l.active == nil {
		l.active = map[string]bool{}
	}
	l.active[topic] = active
	l.mu.Unlock()
}

// received reports the consumer active on topic when it receives a
// message there before any report on that topic: a failover consumer
// receives messages only while it is the active one, and the broker's
// first notice, sent while the consumer subscribes, can be missed
// (pulsar-client-go v0.19.0 and earlier registered the consumer only once
// the subscribe succeeded, and dropped it). Once a topic has had a report,
// only the broker's notices count: messages still queued in the client
// after a switch to passive must not report it active again.
func (l *listener) received(c pulsar.Consumer, topic string) {
	l.mu.Lock()
	_, reported := l.active[topic]
	if !reported {
		if l.active == nil {
			l.active = map[string]bool{}
		}
		l.active[topic] = true
	}
	l.mu.Unlock()
	if !reported {
		l.src.report(l.log, l.stage, true, c, topic)
	}
}
