package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkalimits"
	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
	"github.com/boulevard-go/boulevard/internal/kafkatopicid"
	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/goexit"
	"github.com/boulevard-go/boulevard/topic/internal/hookcall"
	"github.com/boulevard-go/boulevard/topic/internal/undecodable"
)

// member is one balanced subscriber: a member of the group's Kafka
// consumer group, with a client of its own.
//
// Records fetched from the partitions it is assigned wait in queue (at
// most balanced.queue_capacity: the member's read-ahead) until Receive
// hands them out under a MessageID of this member. Each partition claim
// tracks the offsets it fetched in order; when a message is acked, the
// claim's contiguous prefix of settled offsets is marked for commit
// (sarama's offset manager commits marks every
// Consumer.Offsets.AutoCommit.Interval, and the claim commits once more
// when it is released). A nacked message waits in nacked for
// Options.NackRedeliveryDelay, then goes back to the end of the queue.
// Messages never acked are never committed: when the member leaves
// or its process dies, the group delivers them again from the committed
// offset.
type member[T any] struct {
	t      *kTopic[T]
	group  topic.GroupName
	gid    string
	client sarama.Client
	conns  *kafkaconn.Set // the client's connections
	cg     sarama.ConsumerGroup
	ctx    context.Context
	cancel context.CancelFunc
	// id keeps the topic's ID (Kafka 2.8's metadata v10 on) as of the
	// latest session's Setup, checked every Options.HighWaterInterval: a
	// change (the topic deleted and created again) ends the session
	// (endChanged).
	id kafkatopicid.Watch

	// onRelease is the subscriber's SubscriberOptions.OnRelease: called
	// while a released claim waits for the messages the subscriber holds.
	// Nil: none.
	onRelease func() (done func())
	// reach tells the subscriber's SubscriberOptions.Reach when the
	// member cannot read from the cluster, and when it reads again; its
	// client's responses are heard through Config.MetricRegistry
	// (newClient).
	reach *kafkareach.Reach

	ready     chan struct{} // closed by the first session's Setup
	readyOnce sync.Once
	loopDone  chan struct{}
	errsDone  chan struct{}
	stopOnce  sync.Once
	// fails are the group's failures that go on, logged at growing
	// intervals.
	fails repeatlog.Group
	// undecodable holds back, per partition, the lines of records that do
	// not decode that follow the last one logged by less than
	// logburst.Interval.
	undecodable logburst.Keyed[int32]

	mu          sync.Mutex
	queue       []delivery[T] // fetched, not yet received; queue[head:] live
	head        int
	outstanding map[topic.MessageID]delivery[T] // received, not yet settled
	nextID      topic.MessageID
	closed      bool          // the subscription was closed: Receive ends at once
	ended       bool          // consumption stopped: Receive drains queue, then ends
	stopped     chan struct{} // closed when consumption stops
	dataSig     chan struct{} // cap 1: something to receive, or ended
	room        chan struct{} // closed (and replaced) when queue has room again
	lastErr     error
	// fetchFrom is, per partition, where the member's claim of it reads
	// from: the offset after the last record it queued or skipped, or the
	// claim's initial offset (negative: not known).
	fetchFrom map[int32]int64
	// claims are the member's claims of partitions, with their figures
	// (Stats' Partitions), until they are released.
	claims map[*kafkaoffset.Claim]claimFigures
	// fetchErrs are, per partition claimed, the error of its last failed
	// fetch and when it came; a partition leaves it when a record of it
	// is fetched, or its claim is released.
	fetchErrs map[int32]fetchErr
	// failed is the error consumption ended with (a partition that
	// cannot be decoded): Receive returns it once the queue is drained.
	failed error
	// nacked are the nacked messages waiting for their delay, in the
	// order they come due; nackTimer queues them again when the first
	// one is due (nil while none waits).
	nacked    []nackedDelivery[T]
	nackTimer *time.Timer
	// endSess ends the group session Consume runs (nil between them).
	endSess context.CancelFunc
}

// delivery is one fetched record of a claim (one partition of one group
// session held by the member, guarded by the member's mu).
type delivery[T any] struct {
	c   *kafkaoffset.Claim
	off int64
	v   T
	hdr topic.Headers
	// nacks counts the nacks of the record since its partition came to
	// the member: its Envelope.Redeliveries.
	nacks uint32
}

// nackedDelivery is a nacked message and when it is queued again.
type nackedDelivery[T any] struct {
	d   delivery[T]
	due time.Time
}

// adminContext returns a context that ends with parent, after
// Options.AdminTimeout, or once the topic closes, whichever comes first;
// its goroutine ends with it, so the caller must call cancel.
func (t *kTopic[T]) adminContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, t.b.opts.AdminTimeout)
	go func() {
		select {
		case <-t.closedCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// joinGroup resolves the group's starting offsets, starts a member and
// waits until it has joined the group (its first assignment), bounded by
// parent and Options.AdminTimeout, whichever ends first, even while a join
// request waits at the coordinator. The caller counted the member in
// t.groups; on an error joinGroup (or the member, once it has left)
// uncounts it. opts are the subscriber's.
func (t *kTopic[T]) joinGroup(parent context.Context, g topic.GroupName, opts topic.SubscriberOptions) (*member[T], error) {
	b := t.b
	gid := GroupID(t.name, g)
	ctx, cancel := t.adminContext(parent)
	defer cancel()
	if err := b.startOffsets(ctx, t.kname, gid); err != nil {
		t.leaveGroup(g)
		select {
		case <-t.closedCh:
			return nil, topic.ErrTopicClosed
		default:
		}
		return nil, err
	}
	// The observer is the subscriber's: called on the client's goroutines.
	reach := &kafkareach.Reach{Health: hookcall.Reach(opts.Reach, b.log, slog.String("topic", t.kname), slog.String("group", gid))}
	client, conns, err := b.newClient(ctx, reach)
	if err != nil {
		t.leaveGroup(g)
		select {
		case <-t.closedCh:
			return nil, topic.ErrTopicClosed
		default:
		}
		return nil, err
	}
	parts := 1 // unknown: the whole capacity for each claimed partition
	// The client asks for the topic's partitions unless its first metadata
	// had them: that request too ends when ctx does (see newClient).
	stop := conns.CutWhenDone(ctx)
	ps, err := client.Partitions(t.kname)
	if !stop() {
		_ = client.Close()
		t.leaveGroup(g)
		select {
		case <-t.closedCh:
			return nil, topic.ErrTopicClosed
		default:
		}
		return nil, fmt.Errorf("%w: %w", ErrConnect, ctx.Err())
	}
	if err == nil {
		parts = len(ps)
	}
	kafkalimits.ShareChannels(client.Config(), parts, t.opts.Balanced.Capacity)
	cg, err := sarama.NewConsumerGroupFromClient(gid, client)
	if err != nil {
		_ = client.Close()
		t.leaveGroup(g)
		return nil, fmt.Errorf("%w: %w", ErrConnect, b.red.Err(err))
	}
	m := &member[T]{
		t: t, group: g, gid: gid, client: client, conns: conns, cg: cg, onRelease: opts.OnRelease, reach: reach,
		id:    kafkatopicid.Watch{Client: client, Topic: t.kname},
		ready: make(chan struct{}), loopDone: make(chan struct{}), errsDone: make(chan struct{}),
		outstanding: make(map[topic.MessageID]delivery[T]), fetchFrom: make(map[int32]int64),
		claims: make(map[*kafkaoffset.Claim]claimFigures), fetchErrs: make(map[int32]fetchErr),
		stopped: make(chan struct{}), dataSig: make(chan struct{}, 1),
		fails: repeatlog.Group{Prefix: "kafkatopic", Log: b.log},
		undecodable: logburst.Keyed[int32]{Log: b.log, Level: slog.LevelWarn,
			Msg: "kafkatopic: record does not decode; skipped and committed"},
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		m.cancel()
		_ = cg.Close()
		_ = client.Close()
		t.leaveGroup(g)
		return nil, topic.ErrTopicClosed
	}
	t.members[m] = struct{}{}
	t.mu.Unlock()
	go m.loop()
	go m.logErrors()
	select {
	case <-m.ready:
		return m, nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	last := m.lastErr
	m.mu.Unlock()
	// Leaving waits for a join request in flight, which the coordinator
	// may hold for up to the group's rebalance timeout: the member leaves
	// in the background, so that Subscribe returns by AdminTimeout. It
	// stays in t.members until it has left, so closing the topic or the
	// backend waits for it.
	go m.teardown(true)
	select {
	case <-t.closedCh:
		return nil, topic.ErrTopicClosed
	default:
	}
	if err := parent.Err(); err != nil {
		return nil, fmt.Errorf("%w: group %q had not assigned partitions when the subscribe's context ended: %w", ErrJoin, gid, err)
	}
	if last == nil {
		last = ctx.Err()
	}
	return nil, fmt.Errorf("%w: group %q did not assign partitions within %s: %w", ErrJoin, gid, b.opts.AdminTimeout, last)
}

// loop runs the member's group sessions one after the other until it
// stops. After a failed session it waits
// Config.Consumer.Group.Rebalance.Retry.Backoff before it joins again, so
// that a coordinator that refuses the member is not sent one JoinGroup
// request after another. Failed sessions are logged when they begin to
// fail and then at growing intervals (repeatlog.Group), until a session
// starts.
func (m *member[T]) loop() {
	defer close(m.loopDone)
	var watch sync.WaitGroup
	watch.Go(func() { m.id.Run(m.t.b.opts.HighWaterInterval, m.ctx.Done(), m.endChanged) })
	defer watch.Wait()
	backoff := m.client.Config().Consumer.Group.Rebalance.Retry.Backoff
	for {
		ctx, end := context.WithCancel(m.ctx)
		m.mu.Lock()
		m.endSess = end
		m.mu.Unlock()
		err := m.cg.Consume(ctx, []string{m.t.kname}, m)
		m.mu.Lock()
		m.endSess = nil
		m.mu.Unlock()
		end()
		if m.ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return
		}
		if err != nil {
			err = m.t.b.red.Err(err)
			m.mu.Lock()
			m.lastErr = err
			m.mu.Unlock()
			m.fails.SessionFailed(m.ctx, slog.String("topic", m.t.kname), slog.String("group", m.gid), slog.Any("error", err))
			m.reach.SaramaSessionFailed(err)
			t := time.NewTimer(backoff)
			select {
			case <-m.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// endChanged ends the group session running, if any, the member having
// seen its topic's ID change: the topic was deleted and created again
// (between two fetches, or while the read-ahead was full and nothing was
// fetched), and the session's consumers would go on from their positions
// in the old topic, past the records of the new one below them, while a
// partition count that did not change starts no rebalance. The member
// joins again at once, from the group's offsets in the new topic (Kafka
// dropped the old ones with the topic).
func (m *member[T]) endChanged() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.endSess == nil {
		return
	}
	m.t.b.log.Info("kafkatopic: balanced subscriber's topic was created again (its topic ID changed); the session ends",
		slog.String("topic", m.t.kname), slog.String("group", m.gid))
	m.endSess()
}

// logErrors logs the consumer group's asynchronous errors but for a
// partition's fetch that cannot be decoded (kafkarefusal.SaramaCorrupt),
// which ends consumption (endCorrupt). An error that goes on (sarama
// retries a partition's fetch while the cluster cannot be reached) is
// logged when it begins and then at growing intervals, per error text
// (repeatlog.Group: the partitions failing alike share one run), not once
// per retry nor per partition; it ends, with one INFO line, when the last
// of its partitions delivers a record or a session starts.
func (m *member[T]) logErrors() {
	defer close(m.errsDone)
	for err := range m.cg.Errors() {
		ce, ok := err.(*sarama.ConsumerError)
		if ok && ce.Topic != "" && kafkarefusal.SaramaCorrupt(ce.Err) {
			m.endCorrupt(ce)
			continue
		}
		part, cause := int32(-1), error(nil)
		if ok && ce.Topic != "" {
			part, cause = ce.Partition, m.t.b.red.Err(ce.Err)
			m.fetchFailed(part, m.t.b.red.Err(ce))
		}
		m.reach.SaramaError(m.t.b.red.Err(err))
		m.fails.Error(m.ctx, part, m.t.b.red.Err(err), cause, slog.String("topic", m.t.kname), slog.String("group", m.gid))
	}
}

// endCorrupt ends consumption for ce, a fetch of a claimed partition
// that cannot be decoded: sarama fetches the same bytes again for ever,
// and skipping them would lose their records. The first such error is
// logged at ERROR, naming the partition and the offset the claim reads
// from, and is what Receive returns, wrapped in ErrCorruptBatch, once it
// has handed out what was queued; the member leaves its group, so that
// what it did not settle is delivered again, and later errors of the
// kind are not logged.
func (m *member[T]) endCorrupt(ce *sarama.ConsumerError) {
	m.mu.Lock()
	if m.failed != nil || m.ended {
		m.mu.Unlock()
		return
	}
	at, ok := m.fetchFrom[ce.Partition]
	if !ok {
		at = -1
	}
	m.failed = corruptFetch(ce.Topic, ce.Partition, at, m.t.b.red.Err(ce.Err))
	m.mu.Unlock()
	m.t.b.log.Error("kafkatopic: partition fetch cannot be decoded; the subscription ends",
		slog.String("topic", ce.Topic), slog.String("group", m.gid), slog.Int("partition", int(ce.Partition)),
		slog.Int64("offset", at), slog.Any("error", m.t.b.red.Err(ce.Err)))
	// teardown waits for this goroutine to return.
	go m.stop(false)
}

// Setup implements sarama.ConsumerGroupHandler: the first session marks
// the member joined; each ends the runs of failures logged (the cluster
// answers), and a degrade reported to the subscriber's Reach.
func (m *member[T]) Setup(sess sarama.ConsumerGroupSession) error {
	// The ID of the topic the session reads: a failed request keeps the
	// one before.
	_ = m.id.Start()
	m.fails.Started(m.ctx)
	m.reach.SessionStarted()
	m.readyOnce.Do(func() { close(m.ready) })
	m.t.b.log.Info(SessionStartedLog, slog.String("topic", m.t.kname), slog.String("group", m.gid),
		slog.String("member", sess.MemberID()), slog.Int("generation", int(sess.GenerationID())),
		logattr.Partitions("claims", sess.Claims()))
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler.
func (m *member[T]) Cleanup(sess sarama.ConsumerGroupSession) error {
	m.reach.SessionEnded()
	m.t.b.log.Info(SessionEndedLog, slog.String("topic", m.t.kname), slog.String("group", m.gid),
		slog.String("member", sess.MemberID()), slog.Int("generation", int(sess.GenerationID())))
	return nil
}

// SessionStartedLog and SessionEndedLog are the INFO lines of a balanced
// member's group session, one each a rebalance, as the Kafka source logs
// its own: the first names the partitions the member claims (claims), both
// the member id and the group's generation.
const (
	SessionStartedLog = "kafkatopic: group session started"
	SessionEndedLog   = "kafkatopic: group session ended"
)

// ConsumeClaim implements sarama.ConsumerGroupHandler: it queues the
// partition's records for Receive, waiting for room, until the claim ends,
// then releases it. Records already fetched are queued together (one lock
// and one wake-up for all of them).
func (m *member[T]) ConsumeClaim(sess sarama.ConsumerGroupSession, gc sarama.ConsumerGroupClaim) error {
	c := kafkaoffset.New(sess, gc.Topic(), gc.Partition())
	defer m.release(c)
	start := gc.InitialOffset()
	if start == sarama.OffsetOldest {
		// The group has no committed offset it can start from: its lag
		// counts from the log start, which a log retention emptied
		// shares with the log end, not from 0 until a record arrives.
		// Failing, from the first record fetched (fetched).
		if oldest, err := m.client.GetOffset(gc.Topic(), gc.Partition(), sarama.OffsetOldest); err == nil {
			start = oldest
		}
	}
	m.mu.Lock()
	m.fetchFrom[gc.Partition()] = gc.InitialOffset()
	m.claims[c] = claimFigures{committed: max(gc.InitialOffset(), -1), start: start, hw: gc}
	m.mu.Unlock()
	ctx := sess.Context()
	batch := make([]delivery[T], 0, pushBatch)
	msgs := gc.Messages()
	// decoding is the record the codec decodes, nil between records: a
	// Goexit of the codec ends the goroutine while it is set.
	var decoding *sarama.ConsumerMessage
	// skip counts and logs rec, which does not decode (its line held back
	// in a burst), and settles it at once, after what batch holds is
	// queued.
	skip := func(rec *sarama.ConsumerMessage, err error, attrs ...slog.Attr) bool {
		m.t.undecodable.Add(1)
		undecodable.LogKafka(ctx, &m.undecodable, rec, err, attrs...)
		if !m.push(ctx, c, batch) {
			return false
		}
		clear(batch)
		batch = batch[:0]
		m.skip(c, rec.Offset)
		return true
	}
	// add decodes rec into batch.
	add := func(rec *sarama.ConsumerMessage) bool {
		m.fails.Fetched(ctx, rec.Partition)
		decoding = rec
		v, err := topic.Decode(m.t.b.opts.Codec, rec.Value)
		decoding = nil
		if err == nil {
			batch = append(batch, delivery[T]{c: c, off: rec.Offset, v: v, hdr: envelopeHeaders(rec.Headers)})
			return true
		}
		return skip(rec, err)
	}
	loop := func() {
		for {
			select {
			case rec, ok := <-msgs:
				if !ok || !add(rec) {
					return
				}
			more:
				for len(batch) < cap(batch) {
					select {
					case rec, ok := <-msgs:
						if !ok {
							break more
						}
						if !add(rec) {
							return
						}
					default:
						break more
					}
				}
				if !m.push(ctx, c, batch) {
					return
				}
				clear(batch)
				batch = batch[:0]
			case <-ctx.Done():
				return
			}
		}
	}
	// A codec that ends the goroutine (runtime.Goexit) makes its record
	// one that does not decode, and the claim goes on (on a new goroutine;
	// the client's, which called ConsumeClaim, waits for it).
	goexit.Resume(loop, func(stack string) bool {
		rec := decoding
		if rec == nil {
			return false
		}
		decoding = nil
		return skip(rec, message.ErrHandlerExited, slog.String("stack", stack))
	})
	return nil
}

// pushBatch is the most records a claim queues at once.
const pushBatch = 64

// push queues batch, waiting while the member's read-ahead is full. It
// returns false if the session or the member ended first.
func (m *member[T]) push(ctx context.Context, c *kafkaoffset.Claim, batch []delivery[T]) bool {
	m.reach.Reading() // records came in
	capacity := m.t.opts.Balanced.Capacity
	m.mu.Lock()
	if len(batch) > 0 {
		m.fetched(c, batch[0].off)
	}
	for len(batch) > 0 {
		// (a loop: the batch may be larger than the room there is)
		for len(m.queue)-m.head >= capacity {
			if m.ended {
				m.mu.Unlock()
				return false
			}
			if m.room == nil {
				m.room = make(chan struct{})
			}
			room := m.room
			m.mu.Unlock()
			select {
			case <-room:
			case <-ctx.Done():
				return false
			case <-m.stopped:
				return false
			}
			m.mu.Lock()
		}
		if m.ended {
			m.mu.Unlock()
			return false
		}
		n := min(len(batch), capacity-(len(m.queue)-m.head))
		for _, d := range batch[:n] {
			c.Fetch(d.off)
		}
		m.fetchFrom[c.Partition()] = batch[n-1].off + 1
		delete(m.fetchErrs, c.Partition())
		m.queue = append(m.queue, batch[:n]...)
		batch = batch[n:]
		m.signal()
	}
	m.mu.Unlock()
	return true
}

// skip records a fetched offset that is settled at once.
func (m *member[T]) skip(c *kafkaoffset.Claim, off int64) {
	m.mu.Lock()
	m.fetched(c, off)
	c.Skip(off)
	m.fetchFrom[c.Partition()] = off + 1
	delete(m.fetchErrs, c.Partition())
	m.mu.Unlock()
}

func (m *member[T]) signal() {
	select {
	case m.dataSig <- struct{}{}:
	default:
	}
}

// Receive implements topic.SubscriptionState.
func (m *member[T]) Receive(ctx context.Context, dst []topic.Envelope[T]) (int, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return 0, topic.ErrSubscriptionClosed
		}
		if n := m.take(dst); n > 0 {
			m.mu.Unlock()
			return n, nil
		}
		if m.ended {
			err := m.failed
			m.mu.Unlock()
			if err != nil {
				return 0, err
			}
			return 0, topic.ErrSubscriptionClosed
		}
		m.mu.Unlock()
		select {
		case <-m.dataSig:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// queueCompactAt is how many handed-out slots a read-ahead's slice keeps
// at most in front of its live records, once those are fewer: a
// read-ahead that never empties (its subscriber always behind) would
// otherwise grow with every record it ever queued, appends reallocating
// the handed-out slots along with the live ones.
const queueCompactAt = 1024

// compactQueue returns the read-ahead q, whose records from head on are
// live, emptied when none is, or with its live records moved to its
// front when more than queueCompactAt slots before them were handed out
// and they are fewer than those.
func compactQueue[E any](q []E, head int) ([]E, int) {
	switch {
	case head == len(q):
		return q[:0], 0
	case head > queueCompactAt && head > len(q)/2:
		k := copy(q, q[head:])
		clear(q[k:])
		return q[:k], 0
	}
	return q, head
}

// take moves up to len(dst) queued records to dst; the caller holds mu.
func (m *member[T]) take(dst []topic.Envelope[T]) int {
	n := 0
	for n < len(dst) && m.head < len(m.queue) {
		d := m.queue[m.head]
		m.queue[m.head] = delivery[T]{}
		m.head++
		if d.c.Revoked() {
			continue
		}
		m.nextID++
		m.outstanding[m.nextID] = d
		d.c.Hand()
		dst[n] = topic.Envelope[T]{ID: m.nextID, Value: d.v, Headers: d.hdr, Redeliveries: d.nacks}
		n++
	}
	m.queue, m.head = compactQueue(m.queue, m.head)
	if n > 0 && m.room != nil {
		close(m.room)
		m.room = nil
	}
	return n
}

// Settle implements topic.SubscriptionState: an ack settles the message's
// offset (committed once every earlier offset of its partition is
// settled), a nack queues the message to be received again once
// Options.NackRedeliveryDelay has passed.
// ErrMessageNotTracked for an unknown or already settled id; ErrRevoked
// when its partition has moved to another member (which delivers it
// again).
func (m *member[T]) Settle(id topic.MessageID, reason error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.outstanding[id]
	if !ok {
		return topic.ErrMessageNotTracked
	}
	delete(m.outstanding, id)
	c := d.c
	if c.Revoked() {
		return ErrRevoked
	}
	c.Return()
	if reason != nil {
		if m.ended {
			return nil // not committed: the group delivers it again
		}
		if d.nacks < math.MaxUint32 {
			d.nacks++
		}
		delay := m.t.b.opts.NackRedeliveryDelay
		m.nacked = append(m.nacked, nackedDelivery[T]{d: d, due: time.Now().Add(delay)})
		if m.nackTimer == nil {
			m.nackTimer = time.AfterFunc(delay, m.requeue)
		}
		return nil
	}
	c.Settle(d.off)
	return nil
}

// requeue queues again the nacked messages that are due, and waits for the
// next one to be.
func (m *member[T]) requeue() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nackTimer = nil
	if m.ended {
		return
	}
	now := time.Now()
	k := 0
	for k < len(m.nacked) && !m.nacked[k].due.After(now) {
		m.queue = append(m.queue, m.nacked[k].d)
		k++
	}
	n := copy(m.nacked, m.nacked[k:])
	clear(m.nacked[n:])
	m.nacked = m.nacked[:n]
	if k > 0 {
		m.signal()
	}
	if n > 0 {
		m.nackTimer = time.AfterFunc(m.nacked[0].due.Sub(now), m.requeue)
	}
}

// ReleasedHeldLog is the WARN line of a balanced subscriber whose
// partition the group moved while it still held messages of it when
// Options.RevokeTimeout ran out: the partition's next owner delivers them
// again, and their settling here commits nothing.
const ReleasedHeldLog = "kafkatopic: partition released with messages the subscriber still holds; they will be delivered again"

// release ends a claim: records of it still queued, and those nacked
// (before the wait or during it), are dropped (the next owner fetches them
// again), the messages of it the subscriber holds get
// up to Options.RevokeTimeout to be settled (none when the member is
// stopping), and what is settled is committed. While it waits, the
// subscriber's OnRelease hurries their settlement (see
// topic.SubscriberOptions).
func (m *member[T]) release(c *kafkaoffset.Claim) {
	m.mu.Lock()
	m.withdraw(c)
	timeout := m.t.b.opts.RevokeTimeout
	if m.onRelease != nil && c.Handed() > 0 && timeout > 0 && !m.ended {
		// Called without mu: the subscriber may settle at once.
		m.mu.Unlock()
		if done := hookcall.Release(m.t.b.log, m.onRelease, slog.String("topic", m.t.kname), slog.String("group", m.gid),
			slog.Int("partition", int(c.Partition()))); done != nil {
			defer done()
		}
		m.mu.Lock()
	}
	// m.stopped is closed when m.ended is set, both under mu.
	left := c.Release(&m.mu, m.stopped, timeout)
	// Again, now that the claim is revoked: a message nacked while Release
	// waited would otherwise be queued again once its delay passed, taking
	// room in the read-ahead that take frees without waking push.
	m.withdraw(c)
	m.mu.Unlock()
	if left > 0 {
		m.t.b.log.Warn(ReleasedHeldLog, slog.String("topic", m.t.kname), slog.String("group", m.gid),
			slog.Int("partition", int(c.Partition())), slog.Int("held", left), slog.Duration("revoke_timeout", timeout))
	}
	c.Commit()
	m.mu.Lock()
	delete(m.claims, c)
	delete(m.fetchErrs, c.Partition())
	m.mu.Unlock()
	m.undecodable.Forget(m.ctx, c.Partition())
}

// withdraw drops the records of c still queued and its nacked messages
// waiting for their delay; the caller holds mu.
func (m *member[T]) withdraw(c *kafkaoffset.Claim) {
	k := m.head
	for i := m.head; i < len(m.queue); i++ {
		if m.queue[i].c != c {
			m.queue[k] = m.queue[i]
			k++
		}
	}
	clear(m.queue[k:])
	m.queue = m.queue[:k]
	k = 0
	for _, n := range m.nacked {
		if n.d.c != c {
			m.nacked[k] = n
			k++
		}
	}
	clear(m.nacked[k:])
	m.nacked = m.nacked[:k]
}

// Close implements topic.SubscriptionState: the member leaves its group;
// what it received and did not ack is delivered again to the group. It
// returns within Options.AdminTimeout (see Backend.closeWithin).
func (m *member[T]) Close() { m.teardown(true) }

// stop ends consumption (the topic closed): Receive returns what was
// fetched, then ErrSubscriptionClosed.
func (m *member[T]) stop(bool) { m.teardown(false) }

func (m *member[T]) teardown(closing bool) {
	m.mu.Lock()
	if closing {
		m.closed = true
	}
	m.mu.Unlock()
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.ended = true
		close(m.stopped)
		if m.nackTimer != nil {
			m.nackTimer.Stop()
			m.nackTimer = nil
		}
		clear(m.nacked)
		m.nacked = nil
		m.mu.Unlock()
		m.signal()
		m.cancel()
		m.t.b.closeWithin(m.conns, func() {
			_ = m.cg.Close() // leaves the group once every claim is released
			<-m.loopDone
			<-m.errsDone
			_ = m.client.Close()
		})
		m.undecodable.Flush(m.ctx)
		t := m.t
		t.mu.Lock()
		delete(t.members, m)
		t.mu.Unlock()
		t.leaveGroup(m.group)
	})
	m.signal()
}
