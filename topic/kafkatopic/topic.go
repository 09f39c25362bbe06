package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// kTopic is the state of one topic on Kafka.
type kTopic[T any] struct {
	b     *Backend[T]
	name  topic.Name
	kname string
	opts  topic.Options
	// limit is the topic's max.message.bytes as read at its declaration,
	// 0 when unknown: a record larger goes to the single-record producer.
	limit int

	closedCh  chan struct{}
	closeOnce sync.Once
	lagged    atomic.Uint64
	// undecodable counts the records of this topic its subscriptions
	// skipped because the codec could not decode them.
	undecodable atomic.Uint64

	mu         sync.Mutex
	closed     bool
	bound      topic.GroupName         // BalancedOnly: the group fixed by the first subscription
	boundMade  bool                    // a subscription of bound was made: bound stays once its members leave
	groups     map[topic.GroupName]int // members per group in this process
	members    map[*member[T]]struct{} // live balanced members
	broadcasts map[*bsub[T]]struct{}   // live broadcast subscribers
}

func newKTopic[T any](b *Backend[T], name topic.Name, kname string, opts topic.Options, limit int) *kTopic[T] {
	return &kTopic[T]{
		b: b, name: name, kname: kname, opts: opts, limit: limit,
		closedCh:   make(chan struct{}),
		groups:     make(map[topic.GroupName]int),
		members:    make(map[*member[T]]struct{}),
		broadcasts: make(map[*bsub[T]]struct{}),
	}
}

// Publish writes e's value as one record and waits for the broker's
// acknowledgement (Options.Acks). It waits for room in the producer's
// buffer under Block; under DropNewest a full buffer reports
// DroppedOnFull. If ctx ends while Publish waits for room, nothing is
// published and it returns ctx.Err(); if it ends after the record was
// handed to the producer, the error wraps both ErrUnconfirmed and
// ctx.Err(): the record may still be stored, as with any Kafka producer.
//
// A record larger than the topic accepts fails alone, with a
// [*RecordTooLargeError]; the records published with it are stored. The
// producer batches records, and the broker refuses a whole batch for one
// record over the topic's max.message.bytes: so a record larger than the
// limit read at the topic's declaration is sent in a request of its own
// (the broker, whose limit may have changed, decides), and when the broker
// refuses a batch as too large nonetheless (the limit unknown or changed,
// or records that fit alone but not together), each of its records is
// sent again alone, as the producer interceptors of Options.Config left
// it: they are not called on it again, so it carries each one's effect
// once.
func (t *kTopic[T]) Publish(ctx context.Context, e topic.Envelope[T], onFull topic.OnFull) (topic.PublishOutcome, error) {
	return t.publish(ctx, e, onFull == topic.Block)
}

// TryPublish is Publish without waiting for room in the producer's buffer:
// DroppedOnFull when it is full. A record it hands over is waited for
// until the broker acknowledges or the producer gives up on it (sarama's
// Producer.Retry and Producer.Timeout bound that).
func (t *kTopic[T]) TryPublish(e topic.Envelope[T]) (topic.PublishOutcome, error) {
	return t.publish(context.Background(), e, false)
}

func (t *kTopic[T]) publish(ctx context.Context, e topic.Envelope[T], wait bool) (topic.PublishOutcome, error) {
	if e.Ticket != nil {
		return topic.Published, ErrTrackedPublish
	}
	if err := ctx.Err(); err != nil {
		return topic.Published, err
	}
	select {
	case <-t.closedCh:
		return topic.Published, topic.ErrTopicClosed
	default:
	}
	p := t.b.prod
	c := p.get()
	if err := t.encode(c, e); err != nil {
		p.put(c)
		return topic.Published, fmt.Errorf("kafkatopic: encoding the value for topic %q: %w", t.kname, err)
	}
	if t.limit > 0 && recordSize(&c.msg, t.b.v2) > t.limit {
		c.alone = true
	}
	ok, err := p.enqueue(ctx, c, wait, t.closedCh, topic.ErrTopicClosed)
	if err != nil || !ok {
		p.put(c)
		if err != nil {
			return topic.Published, err
		}
		return topic.DroppedOnFull, nil
	}
	select {
	case err = <-c.done:
		if err == nil && !c.resent {
			// Not after a failure: sarama still reads a failed record for
			// a moment after reporting it (its retry backoff), so that
			// completion is left to the garbage collector.
			p.put(c)
		}
	case <-ctx.Done():
		// c is abandoned to the result goroutine (its channel has room).
		return topic.Published, fmt.Errorf("%w: %w", ErrUnconfirmed, ctx.Err())
	}
	if err != nil {
		if errors.Is(err, sarama.ErrMessageSizeTooLarge) {
			return topic.Published, t.tooLarge(&c.msg)
		}
		return topic.Published, fmt.Errorf("kafkatopic: publishing to topic %q: %w", t.kname, t.b.red.Err(err))
	}
	return topic.Published, nil
}

// tooLarge is the error of m, which the broker refused, sent alone, as
// larger than the topic accepts.
func (t *kTopic[T]) tooLarge(m *sarama.ProducerMessage) error {
	e := &RecordTooLargeError{Topic: t.kname, Size: recordSize(m, t.b.v2)}
	if e.Size > t.limit {
		e.Limit = t.limit
	}
	return e
}

// recordSize returns the size in bytes of m as a broker measures it
// against a topic's max.message.bytes: a record batch holding m alone,
// uncompressed, with the offset and length that precede it in the log
// (61 bytes of batch header, then the record with its varint lengths).
// Without v2 (a protocol version older than 0.11) it is a message set of
// the one message: 34 bytes besides its key and value.
func recordSize(m *sarama.ProducerMessage, v2 bool) int {
	key, value := encodedLen(m.Key), encodedLen(m.Value)
	if !v2 {
		return 34 + max(key, 0) + max(value, 0)
	}
	// attributes, timestamp delta and offset delta (both 0: one byte each)
	body := 3 + bytesSize(key) + bytesSize(value) + varintSize(len(m.Headers))
	for _, h := range m.Headers {
		body += bytesSize(len(h.Key)) + bytesSize(len(h.Value))
	}
	return 61 + varintSize(body) + body
}

// encodedLen is e's length, -1 for none.
func encodedLen(e sarama.Encoder) int {
	if e == nil {
		return -1
	}
	return e.Length()
}

// bytesSize is the size of n bytes preceded by their varint length (-1,
// one byte, for none).
func bytesSize(n int) int {
	if n < 0 {
		return 1
	}
	return varintSize(n) + n
}

// varintSize is the size of n as a zigzag varint.
func varintSize(n int) int {
	u := uint64(n) << 1
	if n < 0 {
		u = ^u
	}
	size := 1
	for u >= 0x80 {
		u >>= 7
		size++
	}
	return size
}

// encode fills c's record from e: its value from the codec, its key,
// timestamp and headers from Options.Key, EventTime and Headers and from
// e's headers. A panic in the codec or in those functions is returned as a
// *message.PanicError.
func (t *kTopic[T]) encode(c *completion, e topic.Envelope[T]) (err error) {
	defer message.Recover(&err)
	payload, err := t.b.opts.Codec.Encode(e.Value)
	if err != nil {
		return err
	}
	c.msg.Topic = t.kname
	c.msg.Value = sarama.ByteEncoder(payload)
	if t.b.opts.Key != nil {
		if k := t.b.opts.Key(e.Value); k != nil {
			c.msg.Key = sarama.ByteEncoder(k)
		}
	}
	if t.b.opts.EventTime != nil {
		c.msg.Timestamp = t.b.opts.EventTime(e.Value) // zero: the producer sets it
	}
	c.msg.Headers, c.hbuf = recordHeaders(c.hdr[:0], c.hbuf, t.b.opts.Headers, e)
	return nil
}

// recordHeaders appends to dst the record headers of e: those of the
// Options.Headers function, then one per entry of e.Headers (so that on a
// key both use, the envelope's value is the one a consumer reads last).
// It returns nil when there are none, and the array holding the bytes of
// e's headers: buf's when it is large enough, for the caller to reuse once
// the record is done with.
func recordHeaders[T any](dst []sarama.RecordHeader, buf []byte, fromValue func(T) []sarama.RecordHeader, e topic.Envelope[T]) ([]sarama.RecordHeader, []byte) {
	if fromValue != nil {
		dst = append(dst, fromValue(e.Value)...)
	}
	if len(e.Headers) > 0 {
		// The envelope's keys and values are copied into one array,
		// buf's when it is large enough, each header's bytes capped so
		// that an append to one cannot write over the next.
		n := 0
		for k, v := range e.Headers {
			n += len(k) + len(v)
		}
		if buf == nil || cap(buf) < n {
			buf = make([]byte, 0, n)
		}
		buf = buf[:0]
		for k, v := range e.Headers {
			start := len(buf)
			buf = append(buf, k...)
			mid := len(buf)
			buf = append(buf, v...)
			dst = append(dst, sarama.RecordHeader{Key: buf[start:mid:mid], Value: buf[mid:len(buf):len(buf)]})
		}
	}
	if len(dst) == 0 {
		return nil, buf
	}
	return dst, buf
}

// envelopeHeaders returns a record's headers as topic.Headers (the last
// value of a repeated key), or nil when it has none. The keys and values
// share one string.
func envelopeHeaders(hs []*sarama.RecordHeader) topic.Headers {
	if len(hs) == 0 {
		return nil
	}
	n := 0
	for _, h := range hs {
		if h != nil {
			n += len(h.Key) + len(h.Value)
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, h := range hs {
		if h != nil {
			sb.Write(h.Key)
			sb.Write(h.Value)
		}
	}
	all := sb.String()
	out := make(topic.Headers, len(hs))
	at := 0
	for _, h := range hs {
		if h != nil {
			k, v := len(h.Key), len(h.Value)
			out[all[at:at+k]] = all[at+k : at+k+v]
			at += k + v
		}
	}
	return out
}

// Subscribe joins a balanced group (its consumer group is GroupID; a new
// group starts at the log end as of Subscribe returning, or at the oldest
// record with Options.InitialOffset earliest) or adds a
// broadcast subscriber that reads every partition from the log end as of
// Subscribe returning. It returns once ctx ends or Options.AdminTimeout
// has passed, whichever comes first (and the time to cut the subscriber's
// connections), even when the brokers stopped answering; the error then
// wraps ctx.Err() or, for the timeout, context.DeadlineExceeded, and what
// the subscribe had made (a member, which leaves its group in the
// background, or a subscriber's client) is closed. An ended ctx
// subscribes nothing. A balanced member calls opts.OnRelease while a
// rebalance's revoke waits for the messages of the partition the
// subscriber holds (see Options.RevokeTimeout); a broadcast subscriber,
// which belongs to no group, never does. opts.Reach hears when the
// subscription cannot read from the cluster (kafkareach.Reach's rule:
// a balanced member's group sessions failing twice in a row, or its
// client out of brokers; a broadcast subscriber's client out of
// brokers) and when it reads again (records, a session started, or an
// answer read HeardQuiet after the last failure).
func (t *kTopic[T]) Subscribe(ctx context.Context, mode topic.SubscriptionMode, opts topic.SubscriberOptions) (topic.SubscriptionState[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	if mode.IsBroadcast() {
		if t.opts.Mode == topic.BalancedOnly {
			t.mu.Unlock()
			return nil, topic.ErrSubscribeBroadcastNotSupported
		}
		if t.closed {
			t.mu.Unlock()
			return nil, topic.ErrTopicClosed
		}
		t.mu.Unlock()
		if !t.b.subscribing() {
			return nil, topic.ErrTopicClosed
		}
		defer t.b.admins.Done()
		s, err := t.subscribeBroadcast(ctx, opts.Reach)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	g := mode.Group()
	if t.opts.Mode == topic.BroadcastOnly {
		t.mu.Unlock()
		return nil, topic.ErrSubscribeBalancedNotSupported
	}
	if t.opts.Mode == topic.BalancedOnly && t.bound != "" && t.bound != g {
		t.mu.Unlock()
		return nil, topic.ErrSubscribeSingleGroupViolation
	}
	if t.closed {
		t.mu.Unlock()
		return nil, topic.ErrTopicClosed
	}
	t.bound = g
	t.groups[g]++ // counted while joining, so the group stays bound
	t.mu.Unlock()
	if !t.b.subscribing() {
		t.leaveGroup(g)
		return nil, topic.ErrTopicClosed
	}
	defer t.b.admins.Done()
	m, err := t.joinGroup(ctx, g, opts)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.bound == g {
		t.boundMade = true
	}
	t.mu.Unlock()
	return m, nil
}

// leaveGroup uncounts one member of g. The last one to leave a bound
// group of which no subscription was made (each Subscribe failed) unbinds
// the topic: the group stays bound only while a Subscribe joins it.
func (t *kTopic[T]) leaveGroup(g topic.GroupName) {
	t.mu.Lock()
	if t.groups[g]--; t.groups[g] <= 0 {
		delete(t.groups, g)
		if t.bound == g && !t.boundMade {
			t.bound = ""
		}
	}
	t.mu.Unlock()
}

// Stats counts this process's groups and broadcast subscribers, the
// records broadcast subscribers missed and those its subscriptions skipped
// because they do not decode, and lists the partitions its members claim
// and its broadcast subscribers read, with their lag. It sends no request
// to the cluster: it reads what the subscribers keep anyway and the log
// ends the backend listed last (see Options.HighWaterInterval).
func (t *kTopic[T]) Stats() topic.StateStats {
	t.mu.Lock()
	st := topic.StateStats{BalancedGroups: len(t.groups), BroadcastSubscribers: len(t.broadcasts), Lagged: t.lagged.Load(),
		Undecodable: t.undecodable.Load()}
	t.mu.Unlock()
	st.Partitions = t.partitions()
	return st
}

// Close closes the topic: publishes fail with ErrTopicClosed, members
// leave their groups and subscribers stop fetching; each then returns what
// it had fetched and ErrSubscriptionClosed. The Kafka topic and the
// groups' committed offsets stay. It returns within Options.AdminTimeout
// (and the time to cut connections) even when the brokers stopped
// answering. Idempotent.
func (t *kTopic[T]) Close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		close(t.closedCh)
		t.mu.Unlock()
		// No subscriber joins once closed is set.
		ms, bs := t.readers()
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() { m.stop(false) })
		}
		for _, s := range bs {
			wg.Go(func() { s.stop(false) })
		}
		wg.Wait()
		t.b.forget(t)
	})
}
