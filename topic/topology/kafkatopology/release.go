package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// releaser produces the records of one hold topic back to their main
// topic when they fall due. It is a member of the Kafka consumer group
// "<hold topic>:release", so the releasers of several processes share a
// hold topic's partitions, and it commits a hold record only after the
// broker acknowledged its release.
type releaser[T any] struct {
	b       *Backend[T]
	topic   string
	delay   time.Duration // the hold's
	gid     string
	cg      sarama.ConsumerGroup
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when loop returns
	closing liveset.Closing

	// stalls are the partitions it cannot go on releasing (Backend.Stats)
	// and the failures it logs at growing intervals.
	stalls stalls
	// at is, per claimed partition, where its claim is (see offset);
	// guarded by atMu.
	atMu sync.Mutex
	at   map[int32]*claimAt
	// foreignLines keeps the WARN lines of the records it skips (records
	// it did not write) to a few per partition (see logburst.Keyed).
	foreignLines logburst.Keyed[int32]
	// aheadLines keeps the WARN lines of the records due later than the
	// hold's delay from when the releaser read them to a few per partition.
	aheadLines logburst.Keyed[int32]
}

// foreignLog is the message of the lines of the hold records a releaser
// skips.
const foreignLog = "kafkatopology: hold record without a valid due time, topic and group; skipped and committed"

// aheadLog is the message of the lines of the hold records due later than
// the hold's delay from when the releaser read them.
const aheadLog = "kafkatopology: hold record due later than its hold's delay from now (the producing process's clock ahead of this one's, or a due time not written by a hold); released after the hold's delay"

// aheadLogged is how far past the hold's delay from its read a record's
// due time must be for its line: clocks a few milliseconds apart are not
// worth one.
const aheadLogged = time.Second

// claimAt is where a claim is: the offset after the last record it
// received (-1: not known; stored by the claim alone), the records
// fetched and not yet received, the offset it marked for commit last
// (the group's committed offset as it began, -1: none), where it started,
// its consumer's high-water mark, and whether it ended (Backend.Stats).
type claimAt struct {
	next atomic.Int64
	// first is the offset of the first record the claim received (-1:
	// none yet): where a claim that starts at the oldest record (the
	// group has no committed offset) found the log to start.
	first  atomic.Int64
	msgs   <-chan *sarama.ConsumerMessage
	marked atomic.Int64
	start  int64
	hw     highWater
	ended  atomic.Bool
}

func newReleaser[T any](b *Backend[T], d *dialing, kname string, delay time.Duration) (*releaser[T], error) {
	gid := kname + ":release"
	cfg, _ := d.child(b.cfg)
	cg, err := sarama.NewConsumerGroup(b.opts.Brokers, gid, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: consumer group %q: %w", ErrConnect, gid, b.red.Err(err))
	}
	r := &releaser[T]{b: b, topic: kname, delay: delay, gid: gid, cg: cg, done: make(chan struct{}),
		at:           map[int32]*claimAt{},
		foreignLines: logburst.Keyed[int32]{Log: b.log, Level: slog.LevelWarn, Msg: foreignLog},
		aheadLines:   logburst.Keyed[int32]{Log: b.log, Level: slog.LevelWarn, Msg: aheadLog}}
	r.stalls.init(kname, b.log.With(slog.String("group", gid)), b.red)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// start starts the releaser's group sessions, once the backend has
// registered it.
func (r *releaser[T]) start() { go r.loop(r.gid) }

// discard closes releasers that were made and never started.
func discard[T any](rs []*releaser[T]) {
	for _, r := range rs {
		r.cancel()
		_ = r.cg.Close()
	}
}

// loop runs the group sessions one after the other until the releaser
// stops. Its failures are logged once per stall and then at growing
// intervals, not once per retry (see Stall): the group's errors (a
// partition whose fetch cannot be decoded stalls it, at its offset, and
// is not skipped: that would lose its letters) and the sessions' (the
// cluster cannot be reached, the hold topic was deleted), which stall
// the whole hold topic until a session starts.
func (r *releaser[T]) loop(gid string) {
	defer close(r.done)
	var wg sync.WaitGroup
	wg.Go(func() {
		for err := range r.cg.Errors() {
			r.stalls.groupError(err, r.offset)
		}
	})
	defer wg.Wait()
	backoff := r.b.cfg.Consumer.Group.Rebalance.Retry.Backoff
	for {
		err := r.cg.Consume(r.ctx, []string{r.topic}, r)
		if r.ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return
		}
		if err != nil {
			r.stalls.fail(stallSession, -1, -1, fmt.Errorf("consumer group %q on hold topic %q: %w", gid, r.topic, err))
			if !sleep(r.ctx, backoff) {
				return
			}
		}
	}
}

// offset is where sarama fetches partition part from, -1 when not known:
// the offset after the last record the claim received and those fetched
// for it meanwhile (the offsets of a hold topic follow one another; a
// gap, such as a transaction's marker, makes it lower).
func (r *releaser[T]) offset(part int32) int64 {
	r.atMu.Lock()
	defer r.atMu.Unlock()
	if at := r.at[part]; at != nil {
		if next := at.next.Load(); next >= 0 {
			return next + int64(len(at.msgs))
		}
	}
	return -1
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Setup implements sarama.ConsumerGroupHandler: a session started, so the
// hold topic's stall ends, and those of partitions it no longer claims.
func (r *releaser[T]) Setup(sess sarama.ConsumerGroupSession) error {
	parts := sess.Claims()[r.topic]
	r.atMu.Lock()
	for p := range r.at {
		if !slices.Contains(parts, p) {
			delete(r.at, p)
		}
	}
	r.atMu.Unlock()
	r.stalls.keepOnly(parts)
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler.
func (r *releaser[T]) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// releaseBatch bounds the records a claim releases in one produce call.
const releaseBatch = 500

// held is a record of a hold partition the claim received: its release
// metadata and when it is released, or foreign when the releaser did not
// write it (skipped).
type held struct {
	rec     *sarama.ConsumerMessage
	m       meta
	due     time.Time
	foreign bool
}

// ConsumeClaim implements sarama.ConsumerGroupHandler: it releases the
// partition's records in order, each when it is due, and at the latest the
// hold's delay after the claim received it: a due time further ahead (the
// producing process's clock ahead of this one's) does not hold the
// partition, and the letters behind it, any longer than that. While the
// head is not due the partition is paused and the claim waits on one
// timer. Once it is due, the head and the records behind it already
// fetched and due (up to releaseBatch) are produced together (see
// release).
func (r *releaser[T]) ConsumeClaim(sess sarama.ConsumerGroupSession, gc sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	paused := map[string][]int32{r.topic: {gc.Partition()}}
	at := &claimAt{msgs: gc.Messages(), start: gc.InitialOffset(), hw: gc}
	at.next.Store(max(gc.InitialOffset(), -1))
	at.marked.Store(max(gc.InitialOffset(), -1))
	at.first.Store(-1)
	r.atMu.Lock()
	r.at[gc.Partition()] = at
	r.atMu.Unlock()
	defer at.ended.Store(true)
	// The claim's end (a rebalance, the releaser stopping) says what it
	// held back of the records it skipped.
	defer r.foreignLines.Forget(context.Background(), gc.Partition())
	defer r.aheadLines.Forget(context.Background(), gc.Partition())
	var next *held // received, not due when it came
	batch := make([]held, 0, releaseBatch)
	for {
		var h held
		if next != nil {
			h, next = *next, nil
		} else {
			select {
			case m, ok := <-gc.Messages():
				if !ok {
					return nil
				}
				r.received(at, m)
				h = r.held(ctx, m)
			case <-ctx.Done():
				return nil
			}
		}
		if h.foreign {
			at.mark(sess, h.rec)
			continue
		}
		if wait := time.Until(h.due); wait > 0 {
			r.cg.Pause(paused)
			r.b.pauses.Add(1)
			ok := sleep(ctx, wait)
			r.b.resumes.Add(1)
			r.cg.Resume(paused)
			if !ok {
				return nil
			}
		}
		batch = append(batch[:0], h)
	gather:
		for len(batch) < releaseBatch {
			select {
			case m, ok := <-gc.Messages():
				if !ok {
					break gather
				}
				r.received(at, m)
				h := r.held(ctx, m)
				if h.foreign || time.Until(h.due) <= 0 {
					batch = append(batch, h)
					continue
				}
				next = &h
				break gather
			default:
				break gather
			}
		}
		if !r.release(ctx, sess, at, batch) {
			return nil
		}
	}
}

// received notes that the claim received rec.
func (r *releaser[T]) received(at *claimAt, rec *sarama.ConsumerMessage) {
	at.next.Store(rec.Offset + 1)
	at.first.CompareAndSwap(-1, rec.Offset)
	r.stalls.fetched(rec.Partition, rec.Offset)
}

// held reads rec's release metadata, just received; a record the releaser
// did not write is counted and logged (see foreignLines) and comes back
// foreign. It is due at its due time, and at the latest the hold's delay
// from now: one due later than that by aheadLogged or more is logged (see
// aheadLines).
func (r *releaser[T]) held(ctx context.Context, rec *sarama.ConsumerMessage) held {
	var l topology.Letter[T]
	m, err := readHeaders(rec, &l)
	m.shard = l.Shard
	if err != nil || m.topic == "" || m.group == "" {
		r.b.skippedHolds.Add(1)
		r.foreignLines.Line(ctx, rec.Partition,
			[]slog.Attr{slog.String("topic", rec.Topic), slog.Int("partition", int(rec.Partition))},
			slog.Int64Value(rec.Offset), slog.Int64("offset", rec.Offset), slog.Any("error", err))
		return held{rec: rec, foreign: true}
	}
	due := m.due
	if latest := time.Now().Add(r.delay); due.After(latest) {
		if ahead := due.Sub(latest); ahead >= aheadLogged {
			r.aheadLines.Line(ctx, rec.Partition,
				[]slog.Attr{slog.String("topic", rec.Topic), slog.Int("partition", int(rec.Partition))},
				slog.Int64Value(rec.Offset), slog.Int64("offset", rec.Offset), slog.Time("due", m.due),
				slog.Duration("ahead", ahead.Round(time.Millisecond)))
		}
		due = latest
	}
	return held{rec: rec, m: m, due: due}
}

// release produces the records of batch, due and in hold order, back to
// their main topics in one call (the producer keeps their order on each
// partition), and marks each record for commit once it and every record
// before it are released or skipped. A record whose produce failed stops
// the marking there: it is released again on its own, retried as
// releaseRecord does (the first with its backoff, unless the batch was
// refused as too large, the others of the batch at once), and the marking
// goes on behind it; the records after it that
// the broker acknowledged are not produced again, so it reaches its main
// topic after them. false when the
// claim ended or the backend stopped first (the records from the first one
// unreleased on then stay uncommitted).
func (r *releaser[T]) release(ctx context.Context, sess sarama.ConsumerGroupSession, at *claimAt, batch []held) bool {
	msgs := make([]*sarama.ProducerMessage, len(batch))
	errs := make([]error, len(batch))
	sent := make([]*sarama.ProducerMessage, 0, len(batch))
	for i, h := range batch {
		if !h.foreign {
			msgs[i], errs[i] = r.b.partitioned(ctx, r.message(h.rec, h.m), h.m)
			if errs[i] == nil {
				sent = append(sent, msgs[i])
			}
		}
	}
	failed := r.b.sendAll(sent)
	retried := false
	for i, h := range batch {
		if err := errs[i]; err != nil || failed[msgs[i]] != nil {
			if err == nil {
				err = failed[msgs[i]]
			}
			if retried || errors.Is(err, sarama.ErrMessageSizeTooLarge) {
				// Once one went, the others are tried at once; so is a
				// record of a batch refused as too large, which may fit
				// alone.
				err = nil
			}
			if !r.releaseRecord(ctx, h.rec, h.m, msgs[i], err) {
				return false
			}
			retried = true
		}
		at.mark(sess, h.rec)
	}
	if len(sent) > 0 && len(failed) == 0 {
		r.stalls.clear(stallRelease, batch[0].rec.Partition)
	}
	return true
}

// mark marks the claim's records up to rec, which is released or skipped,
// for commit.
func (at *claimAt) mark(sess sarama.ConsumerGroupSession, rec *sarama.ConsumerMessage) {
	sess.MarkOffset(rec.Topic, rec.Partition, rec.Offset+1, "")
	at.marked.Store(rec.Offset + 1)
}

// appendHolds appends the figures of the partitions the releaser claims
// (those whose claim has not ended) to out: their high-water mark is at least the offset after the last
// letter the backend held there, since a paused partition is not fetched
// (see ConsumeClaim).
func (r *releaser[T]) appendHolds(out []HoldStats) []HoldStats {
	r.atMu.Lock()
	defer r.atMu.Unlock()
	for p, at := range r.at {
		if at.ended.Load() {
			continue
		}
		start := at.start
		if first := at.first.Load(); start == kafkaoffset.StartOldest && first >= 0 {
			start = first // the records below it were deleted
		}
		ps := partitionFigures(r.topic, p, at.marked.Load(), start, at.next.Load(),
			max(at.hw.HighWaterMarkOffset(), r.b.holdEnds.end(r.topic, p), r.b.ends.End(r.topic, p)))
		out = append(out, HoldStats{Topic: ps.Topic, Partition: ps.Partition, Committed: ps.Committed,
			Next: ps.Next, HighWater: ps.HighWater, Waiting: ps.Lag})
	}
	return out
}

// appendRead appends the partitions the releaser claims (those whose
// claim has not ended) to out.
func (r *releaser[T]) appendRead(out []topicPartition) []topicPartition {
	r.atMu.Lock()
	defer r.atMu.Unlock()
	for p, at := range r.at {
		if !at.ended.Load() {
			out = append(out, topicPartition{Topic: r.topic, Part: p})
		}
	}
	return out
}

// message is the record that releases rec to its main topic, keeping
// its value, key and headers but the due time and the release topic; its
// partition is chosen by Backend.partitioned.
func (r *releaser[T]) message(rec *sarama.ConsumerMessage, m meta) *sarama.ProducerMessage {
	hs := make([]sarama.RecordHeader, 0, len(rec.Headers))
	for _, h := range rec.Headers {
		if k := string(h.Key); k != HeaderDue && k != HeaderTopic {
			hs = append(hs, *h)
		}
	}
	msg := &sarama.ProducerMessage{Topic: m.topic, Value: sarama.ByteEncoder(rec.Value), Headers: hs}
	if len(rec.Key) > 0 {
		msg.Key = sarama.ByteEncoder(rec.Key)
	}
	return msg
}

// partitioned sets msg's partition: a keyed letter (sequenced) goes back
// to its shard's partition, so it reaches the member whose source holds
// its key. Learning the main topic's partitions is bounded by ctx and
// Options.AdminTimeout.
func (b *Backend[T]) partitioned(ctx context.Context, msg *sarama.ProducerMessage, m meta) (*sarama.ProducerMessage, error) {
	var err error
	msg.Partition, err = b.partition(ctx, m.topic, m.shard, msg.Key != nil)
	return msg, err
}

// sendAll produces msgs in one call and waits for the broker's
// acknowledgements: it returns the error of each message that was not
// acknowledged (all of them when the backend has stopped).
func (b *Backend[T]) sendAll(msgs []*sarama.ProducerMessage) map[*sarama.ProducerMessage]error {
	if len(msgs) == 0 {
		return nil
	}
	failed := map[*sarama.ProducerMessage]error{}
	b.prodMu.RLock()
	defer b.prodMu.RUnlock()
	if b.prodClosed || b.stopped.Load() {
		for _, msg := range msgs {
			failed[msg] = topology.ErrClosed
		}
		return failed
	}
	err := b.prod.SendMessages(msgs)
	if err == nil {
		return nil
	}
	var perMsg sarama.ProducerErrors
	if !errors.As(err, &perMsg) {
		for _, msg := range msgs {
			failed[msg] = b.refused(fmt.Errorf("kafkatopology: producing to topic %q: %w", msg.Topic, b.red.Err(err)))
		}
		return failed
	}
	for _, pe := range perMsg {
		failed[pe.Msg] = b.refused(fmt.Errorf("kafkatopology: producing to topic %q: %w", pe.Msg.Topic, b.red.Err(pe.Err)))
	}
	return failed
}

// releaseRecord produces rec back to its main topic as msg (nil: not made
// yet), err being how its last produce or choice of partition failed, and
// retries until the broker acknowledges it; learning the main topic's
// partitions is bounded by the claim's session and Options.AdminTimeout.
// false when the claim ended or the backend stopped first (the record then
// stays uncommitted). While it fails, the record's partition is stalled
// (see Stall): logged when it begins and at growing intervals, not per
// retry. A record the main topic refuses as too large stalls it so too,
// its error a *LetterTooLargeError naming the topic's max.message.bytes:
// it is released once the topic takes it.
func (r *releaser[T]) releaseRecord(ctx context.Context, rec *sarama.ConsumerMessage, m meta, msg *sarama.ProducerMessage, err error) bool {
	if msg == nil {
		msg = r.message(rec, m)
	}
	backoff := 100 * time.Millisecond
	for {
		if err == nil {
			_, err = r.b.deliver(ctx, msg)
		}
		if err == nil {
			r.stalls.clear(stallRelease, rec.Partition)
			return true
		}
		if r.b.stopped.Load() || errors.Is(err, topology.ErrClosed) {
			return false
		}
		r.stalls.fail(stallRelease, rec.Partition, rec.Offset,
			fmt.Errorf("releasing the record at offset %d to topic %q: %w", rec.Offset, m.topic, err))
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, 5*time.Second)
		_, err = r.b.partitioned(ctx, msg, m)
	}
}

// shut starts stopping the releaser (once): what it has not released
// stays in the hold topic, uncommitted. The channel it returns is closed
// once it has stopped. Its connections are a set of its own within the
// backend's: the backend's Close cuts them when its ctx ends.
func (r *releaser[T]) shut() <-chan struct{} {
	r.cancel()
	return r.closing.Start(func() {
		_ = r.cg.Close()
		<-r.done
	})
}
