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
	seq       uint64 // receive goroutine only
}

// receive moves messages from the client to the stage, never more than the
// feed has granted: the client refills the broker as messages leave its
// queue, and they leave it only as fast as the stage dispatches them.
func (c *consumer) receive(ctx context.Context, feed *producer.Feed[[]byte], maxTake int) error {
	var (
		buf  = make([]*message.Message[[]byte], 0, slabSize)
		msgs []message.Message[[]byte]
		mds  []Metadata
	)
	flush := func() {
		if len(buf) > 0 {
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
		n, err := feed.Acquire(ctx, maxTake)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, producer.ErrFeedClosed) {
				return nil
			}
			return err
		}
		for ; n > 0; n-- {
			pm, err := c.next(ctx, len(buf) > 0, flush)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				closed = true
				return &ConsumerError{Stage: c.stage, Topic: c.topic, Subscription: sub, Kind: ErrConsumerClosed, Err: err}
			}
			if len(msgs) == 0 {
				msgs = make([]message.Message[[]byte], slabSize)
				mds = make([]Metadata, slabSize)
			}
			m, md := &msgs[0], &mds[0]
			msgs, mds = msgs[1:], mds[1:]
			md.fill(pm, sub, &tc)
			c.seq++
			m.Init(pm.Payload(), c, c.seq)
			m.Metadata = md
			m.SetAckData(md.MessageID)
			buf = append(buf, m)
			if len(buf) == cap(buf) {
				flush()
			}
		}
		flush()
	}
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
// ConsumerOptions.NackRedeliveryDelay). Outcomes for a consumer that was
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
		id, ok := o.Data.(pulsar.MessageID)
		if !ok {
			return
		}
		if err := c.c.AckID(id); err != nil {
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
		if o.Disposition == acker.DispositionDiscard {
			ack(o)
			continue
		}
		if id, ok := o.Data.(pulsar.MessageID); ok {
			c.c.NackID(id)
		}
	}
	if errs > 0 {
		c.log.WarnContext(ctx, "pulsar acknowledgements failed; the broker redelivers those messages",
			slog.Int("failed_acks", errs), slog.Any("error", firstErr))
	}
}

// close marks the consumer gone and closes it once.
func (c *consumer) close() {
	c.closeOnce.Do(func() {
		c.gone.Store(true)
		c.c.Close()
	})
}

// listener turns pulsar-client-go's active-consumer events into
// ActiveState reports.
type listener struct {
	src   *Source
	stage int
}

func (l *listener) BecameActive(c pulsar.Consumer, topic string, _ int32) {
	l.src.report(l.stage, true, c, topic)
}

func (l *listener) BecameInactive(c pulsar.Consumer, topic string, _ int32) {
	l.src.report(l.stage, false, c, topic)
}
