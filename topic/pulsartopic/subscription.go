package pulsartopic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/pulsarnack"
	"github.com/boulevard-go/boulevard/internal/pulsarresub"
	"github.com/boulevard-go/boulevard/message"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/hookcall"
)

// BroadcastPrefix starts the name of every broadcast subscription; the
// rest is random, so that each subscriber has its own.
const BroadcastPrefix = "boulevard-broadcast-"

// maxChannel bounds the channel between pulsar-client-go's consumer and
// Receive: it is part of the read-ahead, taken out of the receiver queue.
const maxChannel = 64

// pSub is one subscription: one pulsar-client-go consumer.
type pSub[T any] struct {
	t        *pTopic[T]
	mode     topic.SubscriptionMode
	name     string // the Pulsar subscription
	consumer pulsar.Consumer
	ch       chan pulsar.ConsumerMessage
	log      *slog.Logger

	closed   atomic.Bool   // Close was called
	shut     chan struct{} // closed once the first Close has finished
	stopOnce sync.Once
	stop     chan struct{} // closed by Close, or when the topic closes

	next    topic.MessageID    // only Receive uses it
	ids     []pulsar.MessageID // only Receive uses it
	mu      sync.Mutex
	pending map[topic.MessageID]pulsar.MessageID // received, not yet settled
	// unsettledMax is, for a broadcast subscription, the most messages
	// left unsettled it keeps (see forgetOldestLocked); 0 for a balanced
	// one, whose broker stops delivering past its unacked limit.
	unsettledMax int

	// decoding is the message the codec decodes, nil between messages
	// (only Receive uses it): a Goexit of the codec ends Receive's
	// goroutine while it is set.
	decoding pulsar.Message
	// undecodable holds back, per partition, the lines of messages that do
	// not decode that follow the last one logged by less than
	// logburst.Interval.
	undecodable logburst.Keyed[string]
	// resubscribes counts and logs the resubscriptions of a broadcast
	// subscription (nil for a balanced one).
	resubscribes *pulsarresub.Listener
	// unwatch ends the watch of the consumer's reconnections that
	// reports to the subscriber's SubscriberOptions.Reach (spulsar.WatchConsumer).
	unwatch func()
	// gone reports the consumer's closure; lostOnce logs, once, a closure
	// the subscription did not ask for (lost).
	gone     *spulsar.CloseWatch
	lostOnce sync.Once
}

// randomHex returns n random bytes in hexadecimal.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// readAhead splits a capacity into the consumer's channel and its receiver
// queue per partition, so that channel + queues ≤ capacity (at least one
// message per partition).
func readAhead(capacity, partitions int) (channel, queue int) {
	channel = min(maxChannel, capacity/4)
	queue = max(1, (capacity-channel)/max(1, partitions))
	return channel, queue
}

// newSub subscribes a consumer for mode. The client's subscribe takes no
// context and may never return: newSub waits for it until ctx ends or
// Options.SubscribeTimeout passes, whichever comes first, and a consumer
// the call makes once newSub has returned is closed. opts.Reach hears
// when the consumer cannot reconnect (spulsar.WatchConsumer).
func newSub[T any](ctx context.Context, t *pTopic[T], mode topic.SubscriptionMode, opts topic.SubscriberOptions) (*pSub[T], error) {
	o := t.b.o
	capacity := t.opts.Balanced.Capacity
	co := pulsar.ConsumerOptions{
		Topic:                       t.full,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest,
		NackRedeliveryDelay:         o.NackRedeliveryDelay,
		// The client's default precision (256ms) would round the
		// deadline of a shorter delay into the past.
		NackPrecisionBit: pulsarnack.Bit(o.NackRedeliveryDelay),
	}
	if n := uint(o.MaxReconnectToBroker); n > 0 { // 0: the client's nil, for ever
		co.MaxReconnectToBroker = &n
	}
	if mode.IsBroadcast() {
		capacity = t.opts.Broadcast.Capacity
		co.SubscriptionName = BroadcastPrefix + randomHex(8)
		// Alone on its subscription, a Failover consumer is dispatched to
		// as an Exclusive one, and hears from the broker each time it
		// subscribes again (see internal/pulsarresub).
		co.Type = pulsar.Failover
		co.SubscriptionMode = pulsar.NonDurable
	} else {
		co.SubscriptionName = string(mode.Group())
		co.Type = pulsar.Shared
		if o.Key != nil {
			co.Type = pulsar.KeyShared
		}
	}
	channel, queue := readAhead(capacity, t.partitions)
	ch := make(chan pulsar.ConsumerMessage, channel)
	co.MessageChannel = ch
	co.ReceiverQueueSize = queue
	log := o.Logger.With(slog.String("topic", t.full), slog.String("subscription", co.SubscriptionName))
	var resubscribes *pulsarresub.Listener
	if mode.IsBroadcast() {
		resubscribes = pulsarresub.New(log, "pulsartopic: broadcast subscriber subscribed again after losing its connection; it may have missed what was published while it was away", &t.resubscribes)
		co.EventListener = resubscribes
	}
	gone := spulsar.NewCloseWatch()
	co.Interceptors = pulsar.ConsumerInterceptors{gone}
	unwatch := spulsar.WatchConsumer(t.b.client, &co, hookcall.Reach(opts.Reach, log)) // called on the client's goroutines
	op := "subscribe " + quoteSub(co.SubscriptionName) + " to"
	began := time.Now()
	c, err := bounded(ctx, t.b, op, t.full, o.SubscribeTimeout, spulsar.ErrSubscribeTimeout, func() (pulsar.Consumer, error) {
		return t.b.client.Subscribe(co)
	}, pulsar.Consumer.Close)
	if err != nil {
		unwatch()
	}
	if errors.Is(err, ErrBackendClosed) {
		return nil, topic.ErrTopicClosed // the backend's closing closes the topic
	}
	if err != nil {
		return nil, t.b.fail(op, t.full, t.b.unreached(err, began))
	}
	unsettledMax := 0
	if mode.IsBroadcast() {
		unsettledMax = unsettledLimit(capacity)
	}
	return &pSub[T]{
		t: t, mode: mode, name: co.SubscriptionName, consumer: c, ch: ch,
		unsettledMax: unsettledMax,
		log:          log,
		resubscribes: resubscribes,
		unwatch:      unwatch,
		gone:         gone,
		stop:         make(chan struct{}),
		shut:         make(chan struct{}),
		pending:      make(map[topic.MessageID]pulsar.MessageID),
		undecodable:  logburst.Keyed[string]{Log: log, Level: slog.LevelWarn, Msg: "pulsartopic: cannot decode a message; it is acked and skipped"},
	}, nil
}

func quoteSub(s string) string { return "subscription " + strconv.Quote(s) }

// Receive implements topic.SubscriptionState: it waits for one message,
// then takes what else is ready, up to len(dst). A record the codec cannot
// decode is logged at WARN and acked, so that it is not delivered again.
// Once the topic is closed it no longer waits: it returns what the
// consumer already holds, then ErrSubscriptionClosed. Once the client has
// closed the consumer by itself (see lost) it returns lost's error.
func (s *pSub[T]) Receive(ctx context.Context, dst []topic.Envelope[T]) (int, error) {
	if len(s.ids) < len(dst) {
		s.ids = make([]pulsar.MessageID, len(dst))
	}
	ids := s.ids
	n := 0
	returned := false
	defer func() {
		if !returned {
			s.exited(ids[:n])
		}
	}()
	for n == 0 {
		if s.closed.Load() {
			return 0, topic.ErrSubscriptionClosed
		}
		if err := s.lost(); err != nil {
			return 0, err
		}
		select {
		case cm := <-s.ch:
			n = s.take(cm, dst, ids, n)
		case <-s.gone.Done():
			continue // lost, or closed by Close meanwhile
		case <-s.stop:
			if s.closed.Load() {
				return 0, topic.ErrSubscriptionClosed
			}
			select { // the topic closed: drain without waiting
			case cm := <-s.ch:
				n = s.take(cm, dst, ids, n)
			default:
				return 0, topic.ErrSubscriptionClosed
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	drain:
		for n < len(dst) {
			select {
			case cm := <-s.ch:
				n = s.take(cm, dst, ids, n)
			default:
				break drain
			}
		}
	}
	returned = true
	s.mu.Lock()
	if s.pending == nil { // closed meanwhile: the broker delivers them again
		s.mu.Unlock()
		clear(dst[:n])
		clear(ids[:n])
		return 0, topic.ErrSubscriptionClosed
	}
	for i := range n {
		s.pending[dst[i].ID] = ids[i]
		ids[i] = nil
	}
	var old []pulsar.MessageID
	if s.unsettledMax > 0 && len(s.pending) > s.unsettledMax {
		old = s.forgetOldestLocked()
	}
	s.mu.Unlock()
	for _, mid := range old {
		_ = s.consumer.AckID(mid)
	}
	return n, nil
}

// UnsettledPerSlot bounds what a broadcast subscriber keeps of the
// messages it received and left unsettled, in slots of its read-ahead
// (broadcast.queue_capacity): past UnsettledPerSlot times that many, or
// MinUnsettled if that is more, the older half of them is acked and
// forgotten. A broadcast subscriber need not settle what it receives
// (other backends' do not), and nothing else would bound them: its broker
// keeps delivering to a failover consumer whatever it leaves unacked.
const UnsettledPerSlot = 16

// MinUnsettled is the least a broadcast subscriber keeps of the messages
// it left unsettled, whatever its read-ahead: a subscriber with a small
// read-ahead whose reader holds many messages at once (a pipeline's
// window, its processors' queues and its batches) can settle every one
// it holds.
const MinUnsettled = 1 << 16

// unsettledLimit is how many unsettled messages a broadcast subscriber
// with a read-ahead of capacity keeps.
func unsettledLimit(capacity int) int {
	return max(UnsettledPerSlot*capacity, MinUnsettled)
}

// forgetOldestLocked removes from pending the messages received before
// the latest unsettledMax/2 and returns their ids, for Receive to ack
// once s.mu is released: their Settle then returns
// topic.ErrMessageNotTracked. Each call halves pending, so that the cost
// per received message stays constant. Called by Receive with s.mu held.
func (s *pSub[T]) forgetOldestLocked() []pulsar.MessageID {
	keep := topic.MessageID(s.unsettledMax / 2)
	var old []pulsar.MessageID
	for id, mid := range s.pending {
		if s.next-id >= keep {
			old = append(old, mid)
			delete(s.pending, id)
		}
	}
	return old
}

// lost returns nil while the consumer is open, or was closed by the
// subscription's Close. Otherwise the client closed it by itself (it gave
// up reconnecting, or the broker refused it for good: a deleted topic or
// subscription, a revoked authorization), or the application closed the
// client under the backend: nothing will be delivered through it again,
// and what it delivered can no longer be acknowledged. lost then logs
// one ERROR line, the first time, and returns an *Error wrapping
// ErrConsumerClosed and the client's cause (spulsar.ErrClosedByCall when
// it gave none). The messages it holds are not handed out: the broker
// delivers them again to the group's next consumer.
func (s *pSub[T]) lost() error {
	cause := s.gone.Err()
	if cause == nil || s.closed.Load() {
		return nil
	}
	err := s.t.b.fail("receive on "+quoteSub(s.name)+" of", s.t.full, fmt.Errorf("%w: %w", ErrConsumerClosed, cause))
	s.lostOnce.Do(func() {
		s.log.Error("pulsartopic: the client closed the subscription's consumer; Receive fails", slog.Any("error", err))
	})
	return err
}

// take decodes cm into dst[n] and returns the new count.
func (s *pSub[T]) take(cm pulsar.ConsumerMessage, dst []topic.Envelope[T], ids []pulsar.MessageID, n int) int {
	s.decoding = cm.Message
	v, err := topic.Decode(s.t.b.o.Codec, cm.Payload())
	s.decoding = nil
	if err != nil {
		s.t.undecodable.Add(1)
		s.logUndecodable(cm.Message, err)
		_ = s.consumer.AckID(cm.ID())
		return n
	}
	s.next++
	dst[n] = topic.Envelope[T]{ID: s.next, Value: v, Redeliveries: cm.RedeliveryCount()}
	if props := cm.Properties(); len(props) > 0 {
		dst[n].Headers = props
	}
	ids[n] = cm.ID()
	return n + 1
}

// exited settles what a Receive held when the codec ended its goroutine
// (runtime.Goexit, as t.FailNow does) in Decode: the message it was
// decoding counts as one that does not decode (logged with the stack of
// the exit, unless its line is held back in a burst, and acked), and the messages taken before it
// (taken), which no caller gets now, are nacked, so that the broker
// delivers them again. It does nothing when the goroutine ends for
// another reason (a panic goes on).
func (s *pSub[T]) exited(taken []pulsar.MessageID) {
	m := s.decoding
	if m == nil {
		return
	}
	s.decoding = nil
	s.t.undecodable.Add(1)
	s.logUndecodable(m, message.ErrHandlerExited, slog.Int("nacked", len(taken)), slog.String("stack", string(debug.Stack())))
	_ = s.consumer.AckID(m.ID())
	for i, id := range taken {
		s.consumer.NackID(id)
		taken[i] = nil
	}
}

// logUndecodable logs the line of m, which does not decode with err: the
// topic partition it came from, its id, the error and attrs; a line that
// follows the last of its partition by less than logburst.Interval is
// only counted, with its id.
func (s *pSub[T]) logUndecodable(m pulsar.Message, err error, attrs ...slog.Attr) {
	id := m.ID().String()
	s.undecodable.Line(context.Background(), m.Topic(), []slog.Attr{slog.String("partition_topic", m.Topic())}, slog.StringValue(id),
		append([]slog.Attr{slog.String("message_id", id), slog.String("error", err.Error())}, attrs...)...)
}

// Settle implements topic.SubscriptionState: an ack acknowledges the
// message on the broker (sent in a group, without waiting for the
// broker's answer: one the connection loses lets the broker deliver the
// message to the group again, at least once); a nack asks
// the broker to deliver it again after Options.NackRedeliveryDelay. It
// returns topic.ErrMessageNotTracked for an id this subscription did not
// receive, settled already, or that its closing handed back to the broker,
// and, on a broadcast subscription, for one that UnsettledPerSlot acked
// and forgot.
func (s *pSub[T]) Settle(id topic.MessageID, reason error) error {
	s.mu.Lock()
	mid, ok := s.pending[id]
	if ok {
		delete(s.pending, id)
	}
	s.mu.Unlock()
	if !ok {
		return topic.ErrMessageNotTracked
	}
	if reason != nil {
		s.consumer.NackID(mid)
		return nil
	}
	if err := s.consumer.AckID(mid); err != nil {
		return s.t.b.fail("ack on "+quoteSub(s.name)+" of", s.t.full, err)
	}
	return nil
}

// Close implements topic.SubscriptionState: the consumer leaves its
// subscription, and what it received without settling is the broker's to
// deliver again (to another member, for a balanced group; a broadcast
// subscription ends with it). A Receive waiting returns
// ErrSubscriptionClosed. Idempotent: a later call, or one made at the
// same time, returns once the first has closed the consumer.
func (s *pSub[T]) Close() {
	if s.closed.Swap(true) {
		<-s.shut
		return
	}
	defer close(s.shut)
	s.topicClosed()
	s.mu.Lock()
	s.pending = nil
	s.mu.Unlock()
	s.closeConsumer()
	s.undecodable.Flush(context.Background())
	if s.resubscribes != nil {
		s.resubscribes.Flush(context.Background())
	}
	s.t.leave(s)
}

// closeConsumer closes the consumer, then ends the watch of its
// reconnections.
func (s *pSub[T]) closeConsumer() {
	s.consumer.Close()
	s.unwatch()
}

// topicClosed stops Receive from waiting for more messages.
func (s *pSub[T]) topicClosed() { s.stopOnce.Do(func() { close(s.stop) }) }
