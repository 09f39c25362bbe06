package pulsartopic

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/pulsarsize"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// tryPublishBound bounds TryPublish's wait for the broker's receipt when
// Options.SendTimeout is disabled: TryPublish has no context, and a wait
// with no bound would last for ever against a broker that never answers.
// It is the send timeout's default, the bound closeProducer also takes
// then. A variable so that a test can reach it.
var tryPublishBound = DefaultSendTimeout

// pTopic is the state of one topic: its producer, and the subscriptions
// this process opened on it.
type pTopic[T any] struct {
	b          *Backend[T]
	name       topic.Name
	full       string
	partitions int
	opts       topic.Options
	producer   pulsar.Producer

	// slots mirrors the producer's pending queue: one token per publish
	// sent and not yet confirmed. A blocking publish waits for a token
	// (with its ctx), a try-publish takes one or reports DroppedOnFull.
	// Tokens are given back in the send callback, after pulsar-client-go
	// has released its own slot, so the client's queue (same size) is never
	// found full.
	slots chan struct{}
	sends sync.Pool // *send

	closed  atomic.Bool
	closing chan struct{} // closed by Close
	shut    chan struct{} // closed once the first Close has finished
	// undecodable counts the messages of this topic its subscriptions
	// acked and skipped because the codec could not decode them.
	undecodable atomic.Uint64
	// resubscribes counts the resubscriptions of this process's broadcast
	// subscriptions after a lost connection or an unload, one per topic
	// partition.
	resubscribes atomic.Uint64
	// sending is held (read) by a publish around its SendAsync call, and
	// taken by Close once, so that the producer's Close never overlaps a
	// SendAsync (pulsar-client-go closes the channel SendAsync writes to).
	sending sync.RWMutex
	// producerClosed is closed once the producer is: a publish still
	// waiting for its receipt then returns ErrTopicClosed (the client
	// drops the sends it had not taken yet without calling back).
	producerClosed chan struct{}

	mu        sync.Mutex
	subs      map[*pSub[T]]struct{}
	groups    map[topic.GroupName]int // members per group, in this process
	broadcast int
	bound     topic.GroupName // BalancedOnly: the group of the first balanced subscription
}

// send is the completion of one publish: the producer's callback reports
// the broker's receipt on done. Pooled, with its callback bound once, so a
// publish does not allocate a closure or a channel; bound is the timer of
// a TryPublish's wait (made on first use, stopped when the send is put
// back), so a bounded wait does not allocate one either. Only a send that
// was stored goes back to the pool: one that failed, or whose publisher
// stopped waiting, is left to the client, which may still read its
// message.
type send struct {
	done  chan error
	fn    func(pulsar.MessageID, *pulsar.ProducerMessage, error)
	msg   pulsar.ProducerMessage
	bound *time.Timer
}

func newTopic[T any](ctx context.Context, b *Backend[T], name topic.Name, full string, partitions int, opts topic.Options) (*pTopic[T], error) {
	po := pulsar.ProducerOptions{
		Topic:                   full,
		MaxPendingMessages:      b.o.MaxPendingMessages,
		DisableBlockIfQueueFull: true,
		DisableBatching:         !b.o.Batching,
		BatchingMaxPublishDelay: b.o.BatchingMaxPublishDelay,
		SendTimeout:             b.o.SendTimeout,
	}
	if b.o.Key != nil {
		// Keys route to partitions; batches keep one key each, so Key_Shared
		// consumers can route them.
		po.BatcherBuilderType = pulsar.KeyBasedBatchBuilder
	}
	p, err := b.createProducer(ctx, po)
	if err != nil {
		return nil, b.fail("create producer for", full, err)
	}
	t := &pTopic[T]{
		b: b, name: name, full: full, partitions: partitions, opts: opts, producer: p,
		slots:   make(chan struct{}, b.o.MaxPendingMessages),
		closing: make(chan struct{}), shut: make(chan struct{}), producerClosed: make(chan struct{}),
		subs:   make(map[*pSub[T]]struct{}),
		groups: make(map[topic.GroupName]int),
	}
	t.sends.New = func() any { return t.newSend() }
	return t, nil
}

// closeProducer closes the producer once no SendAsync is running (none
// starts after Close began) and the sends already made have their
// receipts, which taking every slot of the pending queue waits for, for
// at most the send timeout (DefaultSendTimeout when it is disabled): the
// producer's Close drops the sends it has not yet taken, and fails those
// still awaiting a receipt. The publishes still waiting then return
// ErrTopicClosed.
func (t *pTopic[T]) closeProducer() {
	// A barrier: every SendAsync under way has returned, and a publish
	// that comes after sees closed.
	t.sending.Lock()
	//lint:ignore SA2001 the empty section is the barrier
	t.sending.Unlock()
	wait := t.b.o.SendTimeout
	if wait <= 0 {
		wait = DefaultSendTimeout
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
take:
	for range cap(t.slots) {
		select {
		case t.slots <- struct{}{}:
		case <-deadline.C:
			break take
		}
	}
	t.producer.Close()
	close(t.producerClosed)
}

// sendAsync hands msg to the producer in a pooled send, holding the read
// side of t.sending around SendAsync, and returns that send; nil, with
// nothing sent, once the topic is closed. The caller holds a slot. A panic
// in SendAsync (a client given in Options.Client, or pulsar-client-go's
// own) goes on up to the publisher's caller with the lock released and the
// slot given back, as a SendAsync that panics took nothing to call back
// about: the topic's Close, and the publishes after, do not wait for them.
func (t *pTopic[T]) sendAsync(ctx context.Context, msg *pulsar.ProducerMessage) *send {
	t.sending.RLock()
	defer t.sending.RUnlock()
	if t.closed.Load() {
		return nil
	}
	s := t.sends.Get().(*send)
	s.msg = *msg
	returned := false
	defer func() {
		if !returned {
			<-t.slots
		}
	}()
	t.producer.SendAsync(ctx, &s.msg, s.fn)
	returned = true
	return s
}

func (t *pTopic[T]) newSend() *send {
	s := &send{done: make(chan error, 1)}
	s.fn = func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		<-t.slots
		s.done <- err
	}
	return s
}

// receipt waits for the receipt of send s, for at most as long as
// expired, ctx and the topic's producer let it. It reports true and the
// receipt's error when the receipt came, also when the producer closed
// meanwhile: Close waits for every receipt of the sends already made
// before it closes the producer, so a receipt ready then is the
// publish's outcome (its message stored or not), not ErrTopicClosed.
// Otherwise it reports false and the publish's error: s is then left to a
// callback that may still come, and not reused.
func (t *pTopic[T]) receipt(ctx context.Context, s *send, expired <-chan time.Time) (bool, error) {
	var err error
	select {
	case err = <-s.done:
	case <-expired:
		// No receipt within the bound: failed as the client's own send
		// timeout fails a publish.
		return false, &Error{Op: "publish to", Topic: t.full, Err: pulsar.ErrSendTimeout}
	case <-ctx.Done():
		// The callback still comes (the send timeout bounds it).
		return false, ctx.Err()
	case <-t.producerClosed:
		select {
		case err = <-s.done: // it came before the producer closed
		default:
			// The topic closed before the receipt came; the message
			// may or may not be stored.
			return false, topic.ErrTopicClosed
		}
	}
	if s.bound != nil {
		s.bound.Stop()
	}
	if err == nil {
		s.msg = pulsar.ProducerMessage{}
		t.sends.Put(s)
	}
	// A send that failed is not reused: pulsar-client-go may still read
	// its message after failing it (a message over the broker's size is
	// logged once its callback has run).
	return true, err
}

// errTracked refuses a tracked publish: the outcome of a message handled
// by a subscriber in another process cannot reach the publisher.
var errTracked = &topic.UnsupportedError{Backend: Name, What: "ack_propagation.mode", Value: topic.PropagationAuto.String(), Err: topic.ErrUnsupportedPolicy}

// Publish implements topic.State: it sends the message and waits for the
// broker's receipt. With onFull Block it waits for room in the producer's
// pending queue and in the client's memory limit
// (pulsar.ClientOptions.MemoryLimitBytes); with DropNewest it reports
// DroppedOnFull when either is full. If ctx ends while the receipt is awaited, it returns ctx.Err() and
// the message may still have been stored.
func (t *pTopic[T]) Publish(ctx context.Context, e topic.Envelope[T], onFull topic.OnFull) (topic.PublishOutcome, error) {
	if onFull == topic.DropNewest {
		return t.publish(ctx, e, false, 0)
	}
	return t.publish(ctx, e, true, 0)
}

// TryPublish implements topic.State: DroppedOnFull when the producer's
// pending queue is full, otherwise it sends the message and waits for the
// broker's receipt, bounded by Options.SendTimeout, or by
// DefaultSendTimeout when that is disabled: a receipt that does not come
// by then fails the publish with an error wrapping pulsar.ErrSendTimeout
// (the message may still be stored, and it holds its place in the pending
// queue until the broker answers or the topic closes).
func (t *pTopic[T]) TryPublish(e topic.Envelope[T]) (topic.PublishOutcome, error) {
	var bound time.Duration
	if t.b.o.SendTimeout < 0 {
		bound = tryPublishBound
	}
	return t.publish(context.Background(), e, false, bound)
}

// encode makes the message e is sent as: its payload from the codec, its
// key and event time from Options.Key and Options.EventTime, its
// properties from e's headers (the client only reads the map, which nobody
// changes after the publish). A panic in the codec or in those functions
// is returned as a *message.PanicError.
func (t *pTopic[T]) encode(e topic.Envelope[T]) (msg pulsar.ProducerMessage, err error) {
	defer message.Recover(&err)
	if msg.Payload, err = t.b.o.Codec.Encode(e.Value); err != nil {
		return msg, err
	}
	msg.Properties = e.Headers
	if t.b.o.Key != nil {
		msg.Key = t.b.o.Key(e.Value)
	}
	if t.b.o.EventTime != nil {
		msg.EventTime = t.b.o.EventTime(e.Value)
	}
	return msg, nil
}

// publish sends e and waits for its receipt, with ctx and, when bound is
// positive, for at most bound.
func (t *pTopic[T]) publish(ctx context.Context, e topic.Envelope[T], wait bool, bound time.Duration) (topic.PublishOutcome, error) {
	if e.Ticket != nil {
		return topic.Published, errTracked
	}
	if t.closed.Load() {
		return topic.Published, topic.ErrTopicClosed
	}
	if err := ctx.Err(); err != nil {
		return topic.Published, err
	}
	// Encoded before any slot or lock is taken: what the user's functions
	// do (a panic included) cannot hold up the topic's Close.
	msg, err := t.encode(e)
	if err != nil {
		return topic.Published, &Error{Op: "encode a message for", Topic: t.full, Err: err}
	}
	// A blocking publish that finds the client's memory limit full sends
	// again, after a backoff from 1ms doubling up to 100ms.
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		select {
		case t.slots <- struct{}{}:
		default:
			if t.closed.Load() { // Close holds the slots
				return topic.Published, topic.ErrTopicClosed
			}
			if !wait {
				return topic.DroppedOnFull, nil
			}
			select {
			case t.slots <- struct{}{}:
			case <-ctx.Done():
				return topic.Published, ctx.Err()
			case <-t.closing:
				return topic.Published, topic.ErrTopicClosed
			}
		}
		s := t.sendAsync(ctx, &msg)
		if s == nil {
			// Close began: it waits for the sends already made, then
			// closes the producer; nothing more is sent.
			<-t.slots
			return topic.Published, topic.ErrTopicClosed
		}
		var expired <-chan time.Time
		if bound > 0 {
			if s.bound == nil {
				s.bound = time.NewTimer(bound)
			} else {
				s.bound.Reset(bound)
			}
			expired = s.bound.C
		}
		received, err := t.receipt(ctx, s, expired)
		if !received {
			return topic.Published, err
		}
		switch {
		case err == nil:
			return topic.Published, nil
		case wait && errors.Is(err, pulsar.ErrMemoryBufferIsFull):
			// The client's memory limit, shared by every producer of the
			// client, is full and nothing was sent: wait for other sends
			// to complete, then send again.
			timer := time.NewTimer(backoff)
			select {
			case <-timer.C:
				continue
			case <-ctx.Done():
				timer.Stop()
				return topic.Published, ctx.Err()
			case <-t.closing:
				timer.Stop()
				return topic.Published, topic.ErrTopicClosed
			}
		case errors.Is(err, pulsar.ErrSendQueueIsFull), errors.Is(err, pulsar.ErrMemoryBufferIsFull):
			if !wait {
				return topic.DroppedOnFull, nil
			}
			return topic.Published, t.b.fail("publish to", t.full, err)
		case errors.Is(err, pulsar.ErrProducerClosed):
			return topic.Published, topic.ErrTopicClosed
		case ctx.Err() != nil && errors.Is(err, pulsar.ErrContextExpired):
			return topic.Published, ctx.Err()
		}
		return topic.Published, t.b.fail("publish to", t.full, pulsarsize.Refusal(err))
	}
}

// Subscribe implements topic.State. Mode mismatches are reported before the
// closed state, as the in-memory backend does. It waits for the client's
// subscribe until ctx ends or Options.SubscribeTimeout passes, whichever
// comes first; the error then wraps ctx.Err() or, for the timeout,
// sources/pulsar's ErrSubscribeTimeout and context.DeadlineExceeded, and
// the consumer the client makes once Subscribe has returned is closed. An
// ended ctx subscribes nothing. opts.OnRelease is never called: nothing
// the backend does waits for the messages a subscriber holds (an ack
// settles a message on the subscription, whichever of its consumers the
// broker delivers to next). opts.Reach, with a client made by
// sources/pulsar's NewClient (the backend's own, from
// Options.ServiceURL, or one given as Options.Client), hears when the
// subscription's consumer fails sources/pulsar's
// ReconnectFailuresToDegrade attempts in a row to reconnect to a
// broker, and when it has reconnected; with another client, whose log
// lines it cannot read, it hears nothing.
func (t *pTopic[T]) Subscribe(ctx context.Context, mode topic.SubscriptionMode, opts topic.SubscriberOptions) (topic.SubscriptionState[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	if mode.IsBroadcast() {
		if t.opts.Mode == topic.BalancedOnly {
			t.mu.Unlock()
			return nil, topic.ErrSubscribeBroadcastNotSupported
		}
	} else {
		if t.opts.Mode == topic.BroadcastOnly {
			t.mu.Unlock()
			return nil, topic.ErrSubscribeBalancedNotSupported
		}
		if t.opts.Mode == topic.BalancedOnly && t.bound != "" && t.bound != mode.Group() {
			t.mu.Unlock()
			return nil, topic.ErrSubscribeSingleGroupViolation
		}
	}
	if t.closed.Load() {
		t.mu.Unlock()
		return nil, topic.ErrTopicClosed
	}
	t.mu.Unlock()
	s, err := newSub(ctx, t, mode, opts)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	var refused error
	switch {
	case t.closed.Load():
		refused = topic.ErrTopicClosed
	case mode.IsBroadcast():
		t.broadcast++
	case t.opts.Mode == topic.BalancedOnly && t.bound != "" && t.bound != mode.Group():
		refused = topic.ErrSubscribeSingleGroupViolation // another group subscribed meanwhile
	default:
		t.bound = mode.Group()
		t.groups[mode.Group()]++
	}
	if refused == nil {
		t.subs[s] = struct{}{}
	}
	t.mu.Unlock()
	if refused != nil {
		s.closeConsumer()
		return nil, refused
	}
	return s, nil
}

// leave forgets s (called once, by s.Close). The backend forgets a closed
// topic once its last subscription has left.
func (t *pTopic[T]) leave(s *pSub[T]) {
	t.mu.Lock()
	if _, ok := t.subs[s]; !ok {
		t.mu.Unlock()
		return
	}
	delete(t.subs, s)
	if s.mode.IsBroadcast() {
		t.broadcast--
	} else {
		g := s.mode.Group()
		if t.groups[g]--; t.groups[g] == 0 {
			delete(t.groups, g)
		}
	}
	last := t.closed.Load() && len(t.subs) == 0
	t.mu.Unlock()
	if last {
		t.b.forget(t)
	}
}

// Stats implements topic.State: the groups and broadcast subscribers of
// this process, and the messages its subscriptions skipped because they do
// not decode, and the resubscriptions of its broadcast subscriptions.
// Nothing lags on a log.
func (t *pTopic[T]) Stats() topic.StateStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return topic.StateStats{BalancedGroups: len(t.groups), BroadcastSubscribers: t.broadcast, Undecodable: t.undecodable.Load(),
		BroadcastResubscribes: t.resubscribes.Load()}
}

// Close implements topic.State: publishes fail with topic.ErrTopicClosed
// (those waiting for room are woken), the producer is closed once the
// publishes already sent have their receipts, and the subscribers of this
// process stop waiting: they receive what their consumers already hold,
// then ErrSubscriptionClosed. Each consumer stays attached, so that what was
// received can still be acked, until its Subscription is closed (or the
// backend is): what it had not acked is then delivered again by the broker.
// Idempotent: a later call, or one made at the same time, returns once the
// first has closed the producer.
func (t *pTopic[T]) Close() { t.close(false) }

// close closes the topic, and with subs its subscriptions too. A call
// after the first returns once the first has closed the producer.
func (t *pTopic[T]) close(subs bool) {
	t.mu.Lock()
	first := !t.closed.Swap(true)
	if first {
		close(t.closing)
		defer close(t.shut)
	}
	ss := make([]*pSub[T], 0, len(t.subs))
	for s := range t.subs {
		ss = append(ss, s)
	}
	t.mu.Unlock()
	if subs {
		// Together, as the topics: each waits for the broker's answer.
		var wg sync.WaitGroup
		for _, s := range ss {
			wg.Go(s.Close)
		}
		wg.Wait()
	} else {
		for _, s := range ss {
			s.topicClosed()
		}
	}
	if first {
		t.closeProducer()
	} else {
		<-t.shut
	}
	if subs || len(ss) == 0 {
		t.b.forget(t)
	}
}
