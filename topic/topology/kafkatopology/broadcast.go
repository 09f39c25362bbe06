package kafkatopology

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkalimits"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
	"github.com/boulevard-go/boulevard/internal/kafkatopicid"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/internal/goexit"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// broadcastReader reads every partition of the main topic without a
// consumer group, from the log end as of its creation, and delivers the
// records that are for no group in particular.
type broadcastReader[T any] struct {
	buffer[T]
	// reach tells the observer the subscriber sets when the reader's
	// client reaches no broker, and when it reads again; a reader of its
	// own partitions holds no group session (kafkareach.Reach).
	*reach
	b      *Backend[T]
	client sarama.Client
	conns  *kafkaconn.Set // the client's connections, cut when Close's ctx ends
	cons   sarama.Consumer
	wg     sync.WaitGroup
	// id keeps the topic's ID (Kafka 2.8's metadata v10 on), checked
	// every Options.HighWaterInterval and before buffering the first
	// record fetched after failed fetches: a topic deleted and created
	// again begins its partitions' offsets anew, and the reader, whose
	// positions live in memory, reads the new partitions from their
	// oldest records.
	id kafkatopicid.Watch
	// fails are the partitions' fetch errors that go on, the partitions
	// failing alike one run, logged at growing intervals.
	fails repeatlog.Partitions

	kname string
	parts []*broadcastPart // one per partition, in the order read
	// order is the partition of each buffered letter, oldest first
	// (guarded by the buffer's mu).
	order []*broadcastPart

	closing liveset.Closing
}

// broadcastPart is one partition a broadcast reader reads, and how far it
// is (Backend.Stats).
type broadcastPart struct {
	part  int32
	start int64         // the log end as the reader was made
	next  *atomic.Int64 // the offset after the last record fetched
	// failed is set by a failed fetch, and cleared by the pump as it
	// checks the topic's ID before the next record it buffers.
	failed atomic.Bool

	// guarded by the buffer's mu:
	pc sarama.PartitionConsumer // the partition consumer
	// anew is set when the reader saw its topic's ID change: pc is
	// closed, and the partition is read again from its oldest record.
	anew bool
	// done is the offset after the last record buffered or skipped
	// (undecodable, or for a group), start before any.
	done int64
	// buffered are the offsets of the partition's buffered letters,
	// oldest first.
	buffered []int64
	// fetchErr is the error of the partition's last failed fetch, at
	// fetchErrAt; nil once a record of it is fetched.
	fetchErr   error
	fetchErrAt time.Time
}

// position is the offset of the partition's next record not handed out
// nor skipped: its oldest buffered letter's, or done; the caller holds
// the buffer's mu.
func (p *broadcastPart) position() int64 {
	if len(p.buffered) > 0 {
		return p.buffered[0]
	}
	return p.done
}

var (
	_ topology.UndecodableCounter = (*broadcastReader[int])(nil)
	_ topology.ReachReporter      = (*broadcastReader[int])(nil)
)

// newBroadcastReader makes a broadcast reader of kname, whose client dials
// through d (see bounded).
func newBroadcastReader[T any](b *Backend[T], d *dialing, kname string) (*broadcastReader[T], error) {
	cfg, conns := d.child(b.cfg)
	rch := newReach(cfg)
	rch.rule.SessionStarted()
	client, err := sarama.NewClient(b.opts.Brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, b.red.Err(err))
	}
	r := &broadcastReader[T]{buffer: newBuffer[T](b.opts.ReadAhead, b.log), reach: rch, b: b, client: client, conns: conns,
		fails: repeatlog.Partitions{Msg: "kafkatopology: broadcast consumer error", Log: b.log}, kname: kname}
	r.taken = func(ls []topology.Letter[T]) {
		for _, p := range r.order[:len(ls)] {
			p.buffered = p.buffered[1:]
		}
		clear(r.order[:len(ls)])
		r.order = r.order[len(ls):]
	}
	fail := func(err error) (*broadcastReader[T], error) {
		r.release()
		return nil, err
	}
	if r.cons, err = sarama.NewConsumerFromClient(client); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrConnect, b.red.Err(err)))
	}
	parts, err := client.Partitions(kname)
	if err != nil {
		return fail(fmt.Errorf("kafkatopology: partitions of topic %q: %w", kname, b.red.Err(err)))
	}
	r.id = kafkatopicid.Watch{Client: client, Topic: kname}
	if err := r.id.Start(); err != nil {
		return fail(fmt.Errorf("kafkatopology: ID of topic %q: %w", kname, b.red.Err(err)))
	}
	kafkalimits.ShareChannels(client.Config(), len(parts), b.opts.ReadAhead)
	for _, p := range parts {
		end, err := client.GetOffset(kname, p, sarama.OffsetNewest)
		if err != nil {
			return fail(fmt.Errorf("kafkatopology: log end of topic %q partition %d: %w", kname, p, b.red.Err(err)))
		}
		pc, err := r.cons.ConsumePartition(kname, p, end)
		if err != nil {
			return fail(fmt.Errorf("kafkatopology: consuming topic %q partition %d: %w", kname, p, b.red.Err(err)))
		}
		next := new(atomic.Int64) // the offset after the last record fetched
		next.Store(end)
		bp := &broadcastPart{part: p, start: end, next: next, pc: pc, done: end}
		r.mu.Lock()
		r.parts = append(r.parts, bp)
		r.mu.Unlock()
		r.wg.Go(func() { r.pump(pc, bp) })
		r.wg.Go(func() { r.fetchErrors(pc, bp) })
	}
	if r.id.On() {
		r.wg.Go(func() { r.id.Run(b.opts.HighWaterInterval, r.stop, r.anew) })
	}
	if !d.settle() {
		return fail(errCutShort)
	}
	if !b.track(r) {
		return fail(topology.ErrClosed)
	}
	return r, nil
}

// failCorrupt stops the reader's buffering for cerr, a fetch from offset
// at that cannot be decoded (kafkarefusal.SaramaCorrupt): sarama fetches
// the same bytes again for ever, and skipping them would lose their
// letters. The first such error is logged at ERROR, naming the partition
// and the offset, and is what Receive returns, wrapped in
// ErrCorruptBatch, once it has handed out what was buffered; no record
// fetched after it is buffered, and later errors of the kind are not
// logged.
func (r *broadcastReader[T]) failCorrupt(cerr *sarama.ConsumerError, at int64) {
	r.fail(corruptFetch(cerr.Topic, cerr.Partition, at, r.b.red.Err(cerr.Err)), func() {
		r.b.log.Error("kafkatopology: partition fetch cannot be decoded; the broadcast reader stops", slog.String("topic", cerr.Topic),
			slog.Int("partition", int(cerr.Partition)), slog.Int64("offset", at), slog.Any("error", cerr.Err))
	})
}

// fetchErrors logs the fetch errors of pc, bp's consumer, until it
// closes. A fetch error that goes on (the cluster cannot be reached, an
// ACL denies READ) is logged when it begins and then at growing
// intervals, not once per retry, the partitions failing alike one run; a
// partition leaves its run when it delivers a record, and the run ends,
// with one INFO line, when its last partition does.
func (r *broadcastReader[T]) fetchErrors(pc sarama.PartitionConsumer, bp *broadcastPart) {
	for cerr := range pc.Errors() { // a partition consumer retries by itself
		if kafkarefusal.SaramaCorrupt(cerr.Err) {
			r.failCorrupt(cerr, bp.next.Load())
			continue
		}
		red := r.b.red.Err(cerr)
		r.mu.Lock()
		bp.fetchErr, bp.fetchErrAt = red, time.Now()
		r.mu.Unlock()
		bp.failed.Store(true)
		r.rule.SaramaError(red)
		r.fails.Fail(context.Background(), cerr.Partition, red, r.b.red.Err(cerr.Err), slog.String("topic", r.kname))
	}
}

// anew closes every partition's consumer, the reader having seen its
// topic's ID change: each pump then reads its partition again from its
// oldest record (readAnew).
func (r *broadcastReader[T]) anew() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.parts {
		p.anew = true
		p.pc.AsyncClose()
	}
}

// readAnew returns a consumer of bp's partition from its oldest record
// once its consumer ended for the topic's ID changing (anew), and moves
// the reader's position there; nil when it ended otherwise, the reader
// closes, or the new consumer cannot be made (logged at WARN).
func (r *broadcastReader[T]) readAnew(bp *broadcastPart) sarama.PartitionConsumer {
	r.mu.Lock()
	again := bp.anew && !r.closed
	bp.anew = false
	r.mu.Unlock()
	if !again {
		return nil
	}
	part := slog.Int("partition", int(bp.part))
	oldest, err := r.client.GetOffset(r.kname, bp.part, sarama.OffsetOldest)
	var pc sarama.PartitionConsumer
	if err == nil {
		pc, err = r.cons.ConsumePartition(r.kname, bp.part, oldest)
	}
	if err != nil {
		r.b.log.Warn("kafkatopology: broadcast reader cannot continue on a partition after its topic was created again",
			slog.String("topic", r.kname), part, slog.Any("error", r.b.red.Err(err)))
		return nil
	}
	r.b.log.Info("kafkatopology: broadcast reader's topic was created again (its topic ID changed); reading the partition from its oldest record",
		slog.String("topic", r.kname), part, slog.Int64("offset", oldest))
	r.b.ends.Forget(r.kname, bp.part) // the old partition's
	r.mu.Lock()
	bp.pc, bp.start, bp.done = pc, oldest, oldest
	bp.next.Store(oldest)
	if r.closed || bp.anew {
		pc.AsyncClose() // release closed the consumers before; or changed again
	}
	r.mu.Unlock()
	r.wg.Go(func() { r.fetchErrors(pc, bp) })
	return pc
}

// checkID asks for the topic's ID and, when it changed, has every pump
// read its partition again from its oldest record (anew); it reports
// whether it changed.
func (r *broadcastReader[T]) checkID() bool {
	if !r.id.Changed() {
		return false
	}
	r.anew()
	return true
}

// pump buffers one partition's records until the partition consumer
// closes (none once the reader failed), and keeps how far it is in bp;
// after the topic's ID changed, it goes on with a consumer of the new
// partition (readAnew). The first record fetched after a failed fetch is
// buffered once the topic's ID is checked: the failure may have been the
// topic's deletion, and the record one of the topic created again, which
// is then read again with those after it from the oldest record.
func (r *broadcastReader[T]) pump(pc sarama.PartitionConsumer, bp *broadcastPart) {
	// decoding is the record being decoded, nil between records: a Goexit
	// of the codec ends the goroutine while it is set.
	var decoding *sarama.ConsumerMessage
	// discard: the records still to come of pc are the new partition's,
	// read again from its oldest.
	discard := false
	loop := func() {
		for rec := range pc.Messages() {
			bp.next.Store(rec.Offset + 1)
			r.fails.Fetched(context.Background(), rec.Partition)
			r.rule.Reading()
			if discard {
				continue
			}
			if bp.failed.Load() && bp.failed.Swap(false) && r.checkID() {
				discard = true
				continue
			}
			decoding = rec
			l, m, err := r.readLetter(r.b, rec)
			decoding = nil
			if err != nil || m.group != "" {
				r.skipped(bp, rec.Offset)
				continue
			}
			r.mu.Lock()
			bp.fetchErr = nil
			if r.failed == nil && r.waitRoom(nil) {
				r.items = append(r.items, l)
				r.order = append(r.order, bp)
				bp.buffered = append(bp.buffered, rec.Offset)
				bp.done = rec.Offset + 1
				notify(r.sig)
			}
			r.mu.Unlock()
		}
	}
	// A codec that ends the goroutine (runtime.Goexit) makes its record
	// one that does not decode, and the pump goes on (on a new goroutine
	// the ending one waits for).
	for pc != nil {
		discard = false
		goexit.Resume(loop, func(stack string) bool {
			rec := decoding
			if rec == nil {
				return false
			}
			decoding = nil
			r.undecodable.Add(1)
			r.logUndecodable(rec, message.ErrHandlerExited, slog.String("stack", stack))
			r.skipped(bp, rec.Offset)
			return true
		})
		pc = r.readAnew(bp)
	}
}

// skipped notes that the record of bp at offset off was fetched and not
// buffered: it does not decode, or is for a group. Once the reader failed,
// what it fetches is neither buffered nor skipped: its position stays.
func (r *broadcastReader[T]) skipped(bp *broadcastPart, off int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bp.fetchErr = nil
	if r.failed == nil {
		bp.done = off + 1
	}
}

// appendPartitions appends the figures of the partitions the reader reads
// to out: no group, and as Committed its position, the offset of the
// next record it has not handed out nor skipped (see PartitionStats).
func (r *broadcastReader[T]) appendPartitions(out []PartitionStats) []PartitionStats {
	quiet := max(kafkareach.HeardQuiet, 2*r.b.cfg.Consumer.Retry.Backoff)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.parts {
		ps := partitionFigures(r.kname, p.part, p.position(), p.start, p.next.Load(),
			max(p.pc.HighWaterMarkOffset(), r.b.ends.End(r.kname, p.part)))
		if p.fetchErr != nil && time.Since(p.fetchErrAt) < quiet {
			ps.FetchErr = p.fetchErr
		}
		out = append(out, ps)
	}
	return out
}

// appendRead appends the partitions the reader reads to out.
func (r *broadcastReader[T]) appendRead(out []topicPartition) []topicPartition {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.parts {
		out = append(out, topicPartition{Topic: r.kname, Part: p.part})
	}
	return out
}

// Receive implements topology.Reader.
// A nil ctx returns topology.ErrNilContext, nothing consumed.
func (r *broadcastReader[T]) Receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if ctx == nil {
		return 0, topology.ErrNilContext
	}
	return r.receive(ctx, dst)
}

// TryReceive implements topology.Reader: what is buffered. It never
// waits, and ignores ctx but for a nil one, which returns
// topology.ErrNilContext, nothing consumed.
func (r *broadcastReader[T]) TryReceive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if ctx == nil {
		return 0, topology.ErrNilContext
	}
	if len(dst) == 0 {
		return 0, topology.ErrEmptyDst
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, topology.ErrClosed
	}
	if n := r.take(dst); n > 0 || r.failed == nil {
		return n, nil
	}
	return 0, r.failed
}

// Settle does nothing: a broadcast reader commits nothing.
func (r *broadcastReader[T]) Settle(context.Context, *topology.Letter[T]) error { return nil }

// Close implements topology.Reader: it stops the partition consumers and
// closes the reader's client. It returns nil once that is done; if ctx
// ends first (or has already ended: a broadcast reader has nothing to
// commit), it returns an error wrapping ctx.Err() and cuts the client's
// connections, so that the closing ends at once instead of waiting for
// fetches the cluster does not answer. Idempotent: a later call waits,
// within its own ctx, for the same closing.
// A nil ctx returns topology.ErrNilContext and leaves the reader open:
// call Close again with a context.
func (r *broadcastReader[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	return await(ctx, r.shut(), r.conns.Cut, "a broadcast reader")
}

// shut ends the reader's receiving at once and starts its closing (once);
// the channel it returns is closed when the closing is done.
func (r *broadcastReader[T]) shut() <-chan struct{} {
	r.close()
	return r.closing.Start(func() {
		r.release()
		r.undecodableLines.Flush(context.Background())
		r.b.untrack(r)
	})
}

// release stops the partition consumers and closes the client.
func (r *broadcastReader[T]) release() {
	r.close()
	r.mu.Lock()
	for _, p := range r.parts {
		p.pc.AsyncClose()
	}
	r.mu.Unlock()
	r.wg.Wait()
	if r.cons != nil {
		_ = r.cons.Close()
	}
	_ = r.client.Close()
}
