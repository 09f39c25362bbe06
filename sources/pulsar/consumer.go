package pulsar

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// slabSize is how many messages' metadata is allocated at once (the
// messages come from a message.Slab).
const slabSize = 64

// slabPayloadMax is the largest payload whose message and metadata are
// carved from the consumer's slabs. A slab block stays reachable as long
// as any of its messages is (and the block being carved from, as long as
// the consumer runs), and keeps every payload of its messages with it:
// done messages of a block keep their payloads until the whole block is
// unreachable. Above this size a message and its metadata are allocated
// on their own, which costs little beside the payload, so that a message
// done is a payload freed; at or below it a block keeps at most
// (93 + 64) × 1 KiB of payloads after their messages are done.
const slabPayloadMax = 1024

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

	// gone is set when the source closed the consumer (replaced after a
	// failure, or by Close): acknowledgements for its messages are dropped.
	gone atomic.Bool
	// droppedLogged is set once the outcomes dropped for a gone consumer
	// were logged: later ones are only counted.
	droppedLogged atomic.Bool
	closeOnce     sync.Once
	// acks is the queue the ack goroutine (sendAcks) hands to the client.
	acks *ackQueue
	// watch reports the consumer's closure, by whoever closed it.
	watch *CloseWatch
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
	// acked counts the messages Ack was called for: they left the stage,
	// even when the stage has not counted them dispatched yet (the
	// processors may acknowledge a message before the stage charges it).
	acked atomic.Int64
}

// grant is the feed's grant callback: the stage calls it with new permits.
func (c *consumer) grant(n int) {
	// Granted before available, so that Stats never shows more permits
	// available than granted.
	c.src.granted.Add(int64(n))
	c.permits.Add(int64(n))
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
		slab message.Slab[[]byte]
		mds  []Metadata
		typ  = c.src.opts.SubscriptionType
		// redelivered counts the messages of buf the broker delivered
		// before.
		redelivered int64
	)
	flush := func() {
		if len(buf) > 0 {
			// Counted before Deliver, which may hand them straight to
			// the processors: Stats never shows a message nacked before
			// it was received, nor a redelivery it does not show
			// received.
			c.src.received.Add(int64(len(buf)))
			if redelivered > 0 {
				c.src.redelivered.Add(redelivered)
				redelivered = 0
			}
			feed.Deliver(buf...)
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
			return &ConsumerError{Stage: c.stage, Topic: c.topic, Subscription: sub, Broker: c.src.broker, Kind: ErrConsumerClosed, Err: c.src.clean(gone)}
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
				return &ConsumerError{Stage: c.stage, Topic: c.topic, Subscription: sub, Broker: c.src.broker, Kind: ErrConsumerClosed, Err: c.src.clean(err)}
			}
			payload := pm.Payload()
			large := len(payload) > slabPayloadMax
			var md *Metadata
			if large {
				md = new(Metadata)
			} else {
				if len(mds) == 0 {
					mds = make([]Metadata, slabSize)
				}
				md = &mds[0]
				mds = mds[1:]
			}
			md.fill(pm, sub, &tc)
			if md.RedeliveryCount > 0 {
				redelivered++
			}
			if c.events != nil {
				c.events.received(c.c, pm.Topic())
			}
			c.seq++
			var m *message.Message[[]byte]
			if large {
				m = message.New(payload, acker.Acknowledger(c), c.seq)
				if key := md.partitionKey(typ); key != "" {
					m.SetPartitionKey(key)
				}
			} else {
				m = slab.NewKeyed(payload, c, c.seq, md.partitionKey(typ))
			}
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

// acquire returns how many messages the source may take now (up to
// maxTake): permits the feed granted and the source has not spent, within
// the room the gate leaves (queuePlan). It waits when there are none: for a
// grant, or for an acknowledgement, which tells that messages left the
// stage. A consumer closed while the source waits here (the processors are
// busy and the stage holds the window) is reported through its close watch
// as gone, with the client's cause. ctx ending is err.
func (c *consumer) acquire(ctx context.Context, feed *producer.Feed[[]byte], maxTake int) (n int, gone, err error) {
	for {
		if n := c.ready(feed, maxTake); n > 0 {
			return n, nil, nil
		}
		select {
		case <-c.wake:
		case <-c.watch.Done():
			return 0, c.watch.Err(), nil
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

// ready is how many messages the source may take without waiting.
func (c *consumer) ready(feed *producer.Feed[[]byte], maxTake int) int {
	n := min(int(c.permits.Load()), maxTake)
	if n <= 0 {
		return 0
	}
	// What left the stage: counted dispatched, or acknowledged before the
	// stage counted it, so that the acknowledgement's wake finds the room.
	left := max(feed.Stats().Dispatched, int(c.acked.Load()))
	return min(n, c.plan.room(c.taken-left))
}

// CloseWatch is a consumer interceptor (pulsar.ConsumerOptions.Interceptors)
// through which pulsar-client-go tells whoever made the consumer that it
// closed: closed by its maker, by the application (closing the client,
// or ActiveState.Consumer), or by the client itself when it gave up
// reconnecting (ConsumerOptions.MaxReconnectToBroker) or the broker
// refused the consumer for good (a deleted topic or subscription, a lost
// authorization). The client calls OnConsumerClose once per consumer,
// after the close completed. The Pulsar source fails a stage whose
// consumer closed under it; the topic and topology backends fail the
// Receive of a subscription whose consumer they did not close. Make one
// per consumer, with NewCloseWatch; a zero CloseWatch works as well.
type CloseWatch struct {
	made  sync.Once // makes done in a zero CloseWatch
	once  sync.Once
	done  chan struct{}
	cause error // written before done is closed
}

// NewCloseWatch returns a watch of one consumer, to add to its
// ConsumerOptions.Interceptors.
func NewCloseWatch() *CloseWatch { return &CloseWatch{done: make(chan struct{})} }

// ch returns done, made on first use in a zero CloseWatch.
func (w *CloseWatch) ch() chan struct{} {
	w.made.Do(func() {
		if w.done == nil {
			w.done = make(chan struct{})
		}
	})
	return w.done
}

// OnConsumerClose records the client's cause (nil for a close the
// application or the consumer's maker asked for) and reports the closure.
func (w *CloseWatch) OnConsumerClose(_ pulsar.Consumer, cause error) {
	w.once.Do(func() {
		w.cause = cause
		close(w.ch())
	})
}

// Done is closed once the consumer has closed.
func (w *CloseWatch) Done() <-chan struct{} { return w.ch() }

// Err is the cause of a reported closure: the client's, or an error
// wrapping ErrClosedByCall when the close was asked for without one; nil
// while the consumer is open.
func (w *CloseWatch) Err() error {
	select {
	case <-w.ch():
	default:
		return nil
	}
	if w.cause != nil {
		return w.cause
	}
	return ErrClosedByCall
}

// ErrClosedByCall is CloseWatch.Err, and the cause a *ConsumerError
// carries, when the consumer was closed by a call to its Close (its
// maker's, the application's, or the client's when the application
// closed the client) rather than by the client giving up on it.
var ErrClosedByCall = errors.New("pulsar: the consumer was closed by a call to Close")

// BeforeConsume does nothing: CloseWatch only watches the closure.
func (*CloseWatch) BeforeConsume(pulsar.ConsumerMessage) {}

// OnAcknowledge does nothing: CloseWatch only watches the closure.
func (*CloseWatch) OnAcknowledge(pulsar.Consumer, pulsar.MessageID) {}

// OnNegativeAcksSend does nothing: CloseWatch only watches the closure.
func (*CloseWatch) OnNegativeAcksSend(pulsar.Consumer, []pulsar.MessageID) {}

// next returns the consumer's next message. When none is waiting and some
// are buffered, it first lets the client's dispatcher run (it hands messages
// over one at a time), so that deliveries stay batched, then calls flush,
// so that what was taken so far reaches the stage, and waits. It fails when
// ctx ends, or with the close watch's cause when the consumer closed.
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
	select {
	case cm := <-c.ch:
		return cm.Message, nil
	case <-c.watch.Done():
		return nil, c.watch.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Ack acknowledges successful messages, and failed ones per their
// disposition: DispositionDiscard acks, any other nacks (redelivered after
// ConsumerOptions.NackRedeliveryDelay). A failure the pipeline's shutdown
// caused (acker.Interrupted) is neither acked nor nacked, whatever its
// disposition: the message stays unacknowledged and the broker delivers it
// again once the consumer closes, without counting a redelivery against
// it.
//
// Ack does not call the client: it queues the outcomes for the consumer's
// ack goroutine (ackQueueSize of them), which hands them to the client in
// order. When the queue is full (the client is not taking acks, for
// example while it reconnects the consumer), Ack waits for room as long
// as some is made at least every ackRoomWait, then drops the outcomes
// that do not fit (and while the queue stays full, later ones at once):
// they are counted in Stats().DroppedAcks and logged once per such
// event, and the broker redelivers those messages. Outcomes for a
// consumer that was replaced or closed are dropped, counted in
// Stats().DroppedAcks and logged once per consumer: the broker redelivers
// those messages to the consumer that replaced it.
func (c *consumer) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	if c.gone.Load() {
		c.dropGone(ctx, pending(successful, failed))
		return
	}
	c.enqueue(ctx, successful, failed)
	// These messages left the stage: the gate may have room again.
	c.acked.Add(int64(len(successful) + len(failed)))
	c.signal()
}

// dropGone counts n outcomes for a closed or replaced consumer as dropped,
// and logs the first call that brings some.
func (c *consumer) dropGone(ctx context.Context, n int) {
	c.src.droppedAcks.Add(int64(n))
	// One event, however many calls bring its outcomes: the first is
	// logged, every one is counted.
	if n > 0 && c.droppedLogged.CompareAndSwap(false, true) {
		c.log.WarnContext(ctx, "outcomes for messages of a closed or replaced consumer are dropped; the broker redelivers them",
			slog.String("consumer", c.name), slog.Int("outcomes", n),
			slog.String("later_outcomes", "not logged; counted in Stats().DroppedAcks"))
	}
}

// close marks the consumer gone and closes it, once: it stops the ack
// goroutine first (stopAcks: the queued outcomes reach the client unless
// it stopped taking them), so that no ack is handed to the client after
// its close was asked for, closes the consumer, and waits for the ack
// goroutine's last call, which the close ends. The client's close waits
// for its close request (bounded by ClientOptions.OperationTimeout).
func (c *consumer) close() {
	c.closeOnce.Do(func() {
		c.gone.Store(true)
		c.acks.stopAcks()
		c.c.Close()
		<-c.acks.done
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
