package pulsartopology

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/pulsarnack"
	"github.com/boulevard-go/boulevard/internal/pulsarresub"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// BroadcastPrefix starts the name of every broadcast reader's
// subscription; the rest is random.
const BroadcastPrefix = "topology-broadcast-"

// queues are the declared topics of one topology.
type queues[T any] struct {
	b       *Backend[T]
	t       *topology.Topology
	main    string
	holds   []hold
	dlq     string // "" without DLQ
	group   string // "" for broadcast
	subType pulsar.SubscriptionType
	// reserve is what Publish keeps under Options.MaxMessageSize for the
	// metadata a hold or a dead-lettering adds (see reserve).
	reserve int
}

// Topology implements topology.Queues.
func (q *queues[T]) Topology() *topology.Topology { return q.t }

// message encodes l as a producer message for group ("" for every group).
func (q *queues[T]) message(l *topology.Letter[T], group string) (*pulsar.ProducerMessage, error) {
	payload, err := topic.Encode(q.b.opts.Codec, l.Value)
	if err != nil {
		return nil, fmt.Errorf("pulsartopology: encoding a message of topology %q: %w", q.t.Name(), err)
	}
	return &pulsar.ProducerMessage{Payload: payload, Key: l.Key, Properties: properties(l, group)}, nil
}

// Publish implements topology.Queues: every group's subscription on the
// main topic receives l (the key is the message's key, so a sequenced
// topology's Key_Shared subscription keeps a key on one consumer). It
// waits for the broker's receipt until ctx's deadline or
// Options.OperationTimeout, whichever is first, and then returns an error
// wrapping ErrSend and context.DeadlineExceeded; so do Hold, Requeue and
// DeadLetter (see the package documentation, Bounded calls). A letter
// whose message would outgrow Options.MaxMessageSize once held or
// dead-lettered is refused with a *LetterTooLargeError, unsent.
// A nil ctx returns topology.ErrNilContext, nothing sent.
func (q *queues[T]) Publish(ctx context.Context, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if err := topology.CheckHeaders(l.Headers); err != nil {
		return err
	}
	l.Resume = false
	m, err := q.message(&l, "")
	if err != nil {
		return err
	}
	if size, limit := messageSize(m), q.b.opts.MaxMessageSize; size > limit-q.reserve {
		return &LetterTooLargeError{Topic: q.main, Size: size, Reserve: q.reserve, Limit: limit}
	}
	return q.b.send(ctx, q.main, m)
}

// Hold implements topology.Queues: l goes to hold topic i with delayed
// delivery after the hold's delay; the group's subscription on that topic
// delivers it to the group's readers when it is due.
// A nil ctx returns topology.ErrNilContext, nothing sent.
func (q *queues[T]) Hold(ctx context.Context, i int, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if i < 0 || i >= len(q.holds) {
		return fmt.Errorf("pulsartopology: hold queue %d of %d", i, len(q.holds))
	}
	if q.group == "" {
		return errors.New("pulsartopology: a broadcast topology cannot hold")
	}
	m, err := q.message(&l, q.group)
	if err != nil {
		return keepOnError(&l, err)
	}
	m.DeliverAfter = q.holds[i].delay
	return keepOnError(&l, q.b.send(ctx, q.holds[i].full, m))
}

// Requeue implements topology.Queues: l goes back to the main topic marked
// for this group only.
// A nil ctx returns topology.ErrNilContext, nothing sent.
func (q *queues[T]) Requeue(ctx context.Context, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if q.group == "" {
		return errors.New("pulsartopology: a broadcast topology cannot requeue")
	}
	m, err := q.message(&l, q.group)
	if err != nil {
		return keepOnError(&l, err)
	}
	return keepOnError(&l, q.b.send(ctx, q.main, m))
}

// Return implements topology.Queues: the letters' messages are left
// unacknowledged (a later Settle would negatively acknowledge them), and
// the broker delivers them to the group again, before its later messages
// of their keys, once their reader's consumer has closed. Nothing is sent.
func (q *queues[T]) Return(_ context.Context, ls []topology.Letter[T]) error {
	if q.group == "" {
		return errors.New("pulsartopology: a broadcast topology cannot return letters")
	}
	for i := range ls {
		if rc, ok := ls[i].Receipt.(*receipt); ok {
			rc.kept.Store(true)
		}
	}
	return nil
}

// DeadLetter implements topology.Queues.
// A nil ctx returns topology.ErrNilContext, nothing sent.
func (q *queues[T]) DeadLetter(ctx context.Context, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if q.dlq == "" {
		return topology.ErrNoDLQ
	}
	l.Resume = false
	m, err := q.message(&l, "")
	if err != nil {
		return keepOnError(&l, err)
	}
	return keepOnError(&l, q.b.send(ctx, q.dlq, m))
}

// Subscribe implements topology.Queues: one consumer of the group's
// subscription on the main topic and every hold topic (Key_Shared on a
// sequenced topology, Shared otherwise); for a broadcast topology, a
// non-durable subscription of its own on the main topic, starting at its
// latest message, with one Failover consumer, which logs at WARN each
// time it subscribes again after losing its connection. Subscribing is bounded by ctx and
// Options.OperationTimeout (see the package documentation, Bounded
// calls). The reader is a topology.ReachReporter: with a client made by
// sources/pulsar's NewClient (the backend's own, from
// Options.ServiceURL, or one given as Options.Client), it reports that
// it cannot read once its consumer failed sources/pulsar's
// ReconnectFailuresToDegrade attempts in a row to reconnect to a
// broker, and that it reads again once the consumer reconnected; with
// another client, whose log lines it cannot read, it reports nothing.
// A nil ctx returns topology.ErrNilContext.
func (q *queues[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	if ctx == nil {
		return nil, topology.ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The client's default nack precision (256ms) would round the deadline
	// of a shorter delay into the past (see internal/pulsarnack).
	co := pulsar.ConsumerOptions{ReceiverQueueSize: q.b.opts.ReadAhead, NackRedeliveryDelay: q.b.opts.RedeliveryDelay,
		NackPrecisionBit: pulsarnack.Bit(q.b.opts.RedeliveryDelay)}
	if q.group == "" {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		co.Topic = q.main
		co.SubscriptionName = BroadcastPrefix + hex.EncodeToString(rnd[:])
		// Alone on its subscription, a Failover consumer is dispatched to
		// as an Exclusive one, and hears from the broker each time it
		// subscribes again (see internal/pulsarresub).
		co.Type = pulsar.Failover
		co.SubscriptionMode = pulsar.NonDurable
		co.SubscriptionInitialPosition = pulsar.SubscriptionPositionLatest
		co.EventListener = pulsarresub.New(q.b.log.With(slog.String("topic", q.main), slog.String("subscription", co.SubscriptionName)),
			"pulsartopology: broadcast reader subscribed again after losing its connection; it may have missed what was published while it was away", nil)
	} else {
		co.Topics = []string{q.main}
		for _, h := range q.holds {
			co.Topics = append(co.Topics, h.full)
		}
		co.SubscriptionName = q.group
		co.Type = q.subType
	}
	return q.subscribe(ctx, co, q.group, "")
}

// SubscribeDead implements topology.Queues: a consumer of the DLQ's
// subscription DeadSubscription (Shared), bounded as Subscribe, whose
// reader reports its reach as Subscribe's do.
// A nil ctx returns topology.ErrNilContext.
func (q *queues[T]) SubscribeDead(ctx context.Context) (topology.Reader[T], error) {
	if ctx == nil {
		return nil, topology.ErrNilContext
	}
	if q.dlq == "" {
		return nil, topology.ErrNoDLQ
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	co := pulsar.ConsumerOptions{Topic: q.dlq, SubscriptionName: DeadSubscription, Type: pulsar.Shared,
		ReceiverQueueSize: q.b.opts.ReadAhead, NackRedeliveryDelay: markerNackDelay, NackPrecisionBit: pulsarnack.Bit(markerNackDelay)}
	r, err := q.subscribe(ctx, co, "", q.dlq)
	if err != nil {
		return nil, err
	}
	return deadReader[T]{r.(*reader[T])}, nil
}

// subscribe makes a reader (newReader) on a goroutine of the backend,
// bounded by ctx and Options.OperationTimeout (see bounded); a reader made
// once its caller has given up is closed.
func (q *queues[T]) subscribe(ctx context.Context, co pulsar.ConsumerOptions, group, dlq string) (topology.Reader[T], error) {
	topics := co.Topic
	if topics == "" {
		topics = strings.Join(co.Topics, ", ")
	}
	what := fmt.Sprintf("subscription %q on %s", co.SubscriptionName, topics)
	r, err := bounded(ctx, q.b, ErrSubscribe, what, func() (*reader[T], error) {
		return newReader(q.b, co, group, dlq)
	}, func(r *reader[T]) { <-r.shut() })
	if err != nil {
		return nil, err
	}
	return r, nil
}

// keepOnError marks the message l was received as, when err is not nil,
// never to be acknowledged: its hand-off failed, so Settle hands it back
// to the broker to be delivered again. The last hand-off decides: one that
// succeeds after a failed one (a topology Source hands such a letter off
// again itself) lets Settle acknowledge the message.
func keepOnError[T any](l *topology.Letter[T], err error) error {
	if rc, ok := l.Receipt.(*receipt); ok {
		rc.kept.Store(err != nil)
	}
	return err
}
