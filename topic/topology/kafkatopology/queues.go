package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// hold is one declared hold topic.
type hold struct {
	name  string
	delay time.Duration
}

// queues are the declared queues of one topology.
type queues[T any] struct {
	b     *Backend[T]
	t     *topology.Topology
	main  string // Kafka topic names
	holds []hold
	dlq   string
	group string // "" for broadcast
	// reserve is what Publish keeps under the producer's largest message
	// for the headers a hold or a dead-lettering adds (historyReserve).
	reserve int
}

// groupID is the Kafka consumer group of the topology's group on the main
// topic, as topic/kafkatopic names a balanced group: "<topic>:<group>".
func (q *queues[T]) groupID() string {
	return kafkatopic.GroupID(topic.Name(q.t.Name()), topic.GroupName(q.group))
}

// topics are the Kafka topics of the topology: its main topic, its hold
// topics and its DLQ.
func (q *queues[T]) topics() []string {
	names := q.t.Names()
	for i, n := range names {
		names[i] = kafkaName(n)
	}
	return names
}

// Topology implements topology.Queues.
func (q *queues[T]) Topology() *topology.Topology { return q.t }

// record builds the record of l to kname; learning kname's partitions is
// bounded by ctx and Options.AdminTimeout (see Backend.partition). A
// record larger than the producer takes less reserve (0 for a hand-off)
// is a *LetterTooLargeError, before any partition is looked up.
func (q *queues[T]) record(ctx context.Context, kname string, l *topology.Letter[T], reserve int, extra ...sarama.RecordHeader) (*sarama.ProducerMessage, error) {
	payload, err := topic.Encode(q.b.opts.Codec, l.Value)
	if err != nil {
		return nil, fmt.Errorf("kafkatopology: encoding a value for topic %q: %w", kname, err)
	}
	msg := &sarama.ProducerMessage{Topic: kname, Value: sarama.ByteEncoder(payload)}
	if l.Key != "" {
		msg.Key = sarama.StringEncoder(l.Key)
	}
	msg.Headers = append(letterHeaders(l, make([]sarama.RecordHeader, 0, 4+len(extra)+len(l.Headers))), extra...)
	// Version 2: the record batches of Kafka 0.11 on (saramaConfig).
	limit := q.b.cfg.Producer.MaxMessageBytes
	if size := msg.ByteSize(2); size > limit-reserve {
		return nil, &LetterTooLargeError{Topic: kname, Size: size, Reserve: reserve, Limit: limit}
	}
	_, seq := q.t.Sequenced()
	if msg.Partition, err = q.b.partition(ctx, kname, l.Shard, seq); err != nil {
		return nil, q.b.refused(err)
	}
	return msg, nil
}

// produce sends l to kname; from the backend's Close on it returns
// topology.ErrClosed at once (see Backend.Close). ctx bounds only learning
// kname's partitions, when the shared client's metadata lacks them, not
// the produce (see the package documentation). When that fails, the
// letter's delivery is kept from being committed, so the group delivers it
// again. The last produce decides: one that succeeds after a failed one (a sequenced
// source hands such a letter off again itself) lets it be committed. A
// record larger than the producer takes less reserve, or than the broker
// takes, is refused with a *LetterTooLargeError; after the broker's
// refusal, ctx and Options.AdminTimeout also bound reading the topic's
// max.message.bytes for its Limit.
func (q *queues[T]) produce(ctx context.Context, kname string, l *topology.Letter[T], reserve int, extra ...sarama.RecordHeader) error {
	_, err := q.produced(ctx, kname, l, reserve, extra...)
	return err
}

// produced is produce, returning the record produced (its partition and
// offset set) when it succeeds.
func (q *queues[T]) produced(ctx context.Context, kname string, l *topology.Letter[T], reserve int, extra ...sarama.RecordHeader) (*sarama.ProducerMessage, error) {
	err := topology.ErrClosed
	var msg *sarama.ProducerMessage
	if !q.b.stopped.Load() { // once stopped, the client may be closed: not asked
		if msg, err = q.record(ctx, kname, l, reserve, extra...); err == nil {
			msg, err = q.b.deliver(ctx, msg)
		}
	}
	if rc, ok := l.Receipt.(*receipt); ok {
		rc.keep(err != nil)
	}
	if err != nil {
		return nil, err
	}
	return msg, nil
}

// Publish implements topology.Queues: it produces l to the main topic and
// returns once the broker acknowledged it. ctx bounds only learning the
// topic's partitions, not the produce (see the package documentation). A
// letter whose record would outgrow the producer's largest message once
// held or dead-lettered is refused with a *LetterTooLargeError, unproduced.
// A nil ctx returns topology.ErrNilContext, nothing produced.
func (q *queues[T]) Publish(ctx context.Context, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if err := topology.CheckHeaders(l.Headers); err != nil {
		return err
	}
	l.Receipt, l.Resume = nil, false
	return q.produce(ctx, q.main, &l, q.reserve)
}

// Subscribe implements topology.Queues: a member of the group's Kafka
// consumer group on the main topic, or a broadcast reader. Connecting its
// client is bounded by ctx and Options.AdminTimeout (see the package
// documentation, Bounded calls). The reader is a topology.ReachReporter,
// by the Kafka source's rule: it reports that it cannot read once two
// group sessions in a row failed (a member) or its client reached no
// broker (either), and that it reads again on records, a session
// started, or an answer its client read some seconds after the last
// failure. A nil ctx returns topology.ErrNilContext.
func (q *queues[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	if ctx == nil {
		return nil, topology.ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.t.IsBroadcast() {
		return q.subscribe(ctx, fmt.Sprintf("a broadcast reader of topic %q", q.main), func(d *dialing) (topology.Reader[T], error) {
			r, err := newBroadcastReader(q.b, d, q.main)
			if err != nil {
				return nil, err
			}
			return r, nil
		})
	}
	return q.subscribeGroup(ctx, q.main, q.groupID(), q.group)
}

// subscribeGroup makes a member of consumer group gid on kname (see
// subscribe).
func (q *queues[T]) subscribeGroup(ctx context.Context, kname, gid, group string) (topology.Reader[T], error) {
	return q.subscribe(ctx, fmt.Sprintf("a reader of topic %q (group %q)", kname, gid), func(d *dialing) (topology.Reader[T], error) {
		r, err := newGroupReader(q.b, d, kname, gid, group)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}

// subscribe makes a reader with mk, bounded by ctx and
// Options.AdminTimeout (see bounded).
func (q *queues[T]) subscribe(ctx context.Context, what string, mk func(*dialing) (topology.Reader[T], error)) (topology.Reader[T], error) {
	ctx, cancel := context.WithTimeout(ctx, q.b.opts.AdminTimeout)
	defer cancel()
	return bounded(ctx, q.b, ErrConnect, "connecting "+what, mk)
}

// Hold implements topology.Queues: l goes to hold topic i with its due
// time and group; the releaser produces it back to the main topic, for
// this group only, when it is due.
// A nil ctx returns topology.ErrNilContext, nothing produced.
func (q *queues[T]) Hold(ctx context.Context, i int, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if i < 0 || i >= len(q.holds) {
		return fmt.Errorf("kafkatopology: hold queue %d of %d", i, len(q.holds))
	}
	if q.group == "" {
		return errors.New("kafkatopology: a broadcast topology cannot hold")
	}
	h := q.holds[i]
	msg, err := q.produced(ctx, h.name, &l, 0, q.holdHeaders(time.Now().Add(h.delay))...)
	if err == nil {
		q.b.holdEnds.wrote(msg.Topic, msg.Partition, msg.Offset+1)
	}
	return err
}

// holdHeaders are the headers a hold record carries besides the letter's
// history: when it falls due, the group to release it to and the main
// topic to release it to.
func (q *queues[T]) holdHeaders(due time.Time) []sarama.RecordHeader {
	return []sarama.RecordHeader{timeHeader(HeaderDue, due), header(HeaderGroup, q.group), header(HeaderTopic, q.main)}
}

// Requeue implements topology.Queues: l goes back to the main topic for
// this group only.
// A nil ctx returns topology.ErrNilContext, nothing produced.
func (q *queues[T]) Requeue(ctx context.Context, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if q.group == "" {
		return errors.New("kafkatopology: a broadcast topology cannot requeue")
	}
	return q.produce(ctx, q.main, &l, 0, header(HeaderGroup, q.group))
}

// Return implements topology.Queues: the letters' records are left
// uncommitted (their partition's commits stop at the first of them), and
// the group delivers them again, from its committed offset and in their
// order, once their reader has closed or lost their partition, with the
// records after them that it had settled but not committed (at least
// once). Nothing is produced.
func (q *queues[T]) Return(_ context.Context, ls []topology.Letter[T]) error {
	if q.group == "" {
		return errors.New("kafkatopology: a broadcast topology cannot return letters")
	}
	for i := range ls {
		if rc, ok := ls[i].Receipt.(*receipt); ok {
			rc.giveBack()
		}
	}
	return nil
}

// DeadLetter implements topology.Queues.
// A nil ctx returns topology.ErrNilContext, nothing produced.
func (q *queues[T]) DeadLetter(ctx context.Context, l topology.Letter[T]) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if q.dlq == "" {
		return topology.ErrNoDLQ
	}
	l.Resume = false
	return q.produce(ctx, q.dlq, &l, 0)
}

// SubscribeDead implements topology.Queues: a member of the DLQ's consumer
// group "<dlq>:dead", a topology.ReachReporter as Subscribe's members are.
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
	return q.subscribeGroup(ctx, q.dlq, q.dlq+":dead", "")
}
