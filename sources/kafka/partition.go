package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// partition is one claim of one partition within one group generation: the
// shared claim state (permits, handled prefix, slots, acknowledger) and
// what sarama adds (the session, the claim's consumer, and the member's
// own consumer while the partition is rewound or moved).
type partition struct {
	*claim.Claim
	m       *member
	sess    sarama.ConsumerGroupSession
	claimPC highWater                   // the claim's consumer
	ownPC   atomic.Pointer[ownConsumer] // while rewound or moved to a start offset
	// ownHW is the high-water mark the member's consumers last saw before
	// they were closed: the claim's consumer, paused while they read, saw
	// none of what they fetched.
	ownHW atomic.Int64
}

// highWater is what sarama's partition consumers offer to read the
// partition's high-water mark (from their latest fetch response).
type highWater interface{ HighWaterMarkOffset() int64 }

// ownConsumer is a partition consumer of the member reading a claimed
// partition instead of the claim's own.
type ownConsumer struct{ pc sarama.PartitionConsumer }

// highWaterMark reads the partition's high-water mark, the end a reader of
// uncommitted records reads up to, from whichever consumers read it, or
// read it last: a partition waiting out the backoff before a redelivery
// has neither consumer fetching, and the claim's own has been paused since
// the first rewind.
func (p *partition) highWaterMark() int64 {
	hw := p.ownHW.Load()
	if p.claimPC != nil {
		hw = max(hw, p.claimPC.HighWaterMarkOffset())
	}
	if own := p.ownPC.Load(); own != nil {
		hw = max(hw, own.pc.HighWaterMarkOffset())
	}
	return hw
}

// readableEnd is, for a reader of committed records, the end it reads up
// to as far as its fetches tell: the offset after the last record taken
// from the client, every record fetched under read-committed lying below
// the partition's last stable offset. The fetched high-water mark is not
// it: it counts the records of transactions still open, which the reader
// cannot read yet, and sarama's partition consumers expose no last stable
// offset. Stats takes the end listed every HighWaterInterval (the last
// stable offset, listed at the client's isolation level) when higher.
func (p *partition) readableEnd() int64 { return p.Next.Load() }

// pauser is what sarama's partition consumers (and so its group claims)
// offer to stop and restart fetching one partition.
type pauser interface {
	Pause()
	Resume()
}

// consumeClaim runs for as long as the member holds the partition.
//
// A draining member claims nothing: a partition given to it (by a
// cooperative rebalance, which keeps the session, or by a session that
// began as the drain did) makes it end its session and leave the group.
// A partition taken from it while its session goes on (a cooperative
// rebalance) does the same once the partition is released.
func (m *member) consumeClaim(sess sarama.ConsumerGroupSession, claimed sarama.ConsumerGroupClaim) error {
	committed := claimed.InitialOffset() // the group's committed offset, when there is one
	log := m.log.With(slog.String("partition", fmt.Sprintf("%s/%d", claimed.Topic(), claimed.Partition())),
		slog.Int("generation", int(sess.GenerationID())))
	if m.draining() {
		m.leaveOnRebalance(log, "partition assigned")
		return nil
	}
	start, move, ok := m.lookUpStart(sess.Context(), claimed, log)
	if !ok {
		if m.draining() && !m.isDown() && sess.Context().Err() == nil {
			// As above: a draining member claims nothing.
			m.leaveOnRebalance(log, "partition assigned")
		}
		return nil // released meanwhile, the member failed or drains
	}
	p := &partition{m: m, sess: sess, claimPC: claimed}
	hw := p.highWaterMark // the end Stats counts the lag to, with the listed one
	if m.client.Config().Consumer.IsolationLevel == sarama.ReadCommitted {
		hw = p.readableEnd
	}
	topic, part := claimed.Topic(), claimed.Partition()
	p.Claim = claim.New(claim.Config{
		Topic:      topic,
		Partition:  part,
		Generation: sess.GenerationID(),
		MemberID:   sess.MemberID(),
		Group:      m.opts.GroupID,
		Session:    sess,
		Policy:     m.opts.FailurePolicy,
		Window:     m.stage.Flow().MaxWindow(),
		Committed:  committed,
		Start:      start, // -1 when the claim starts at sarama's newest or oldest: unknown until the first record
		Log:        m.log,
		OnAdvance: func(next int64) {
			sess.MarkOffset(topic, part, next, "")
			m.cm.Advanced(next)
		},
		HighWater: hw,
	})
	if start < 0 {
		start = 0
	}

	r := reader{p: p, in: claimed.Messages(), log: log}
	if ps, ok := claimed.(pauser); ok {
		r.claimPause = ps
	}
	if move {
		if ok, drained := r.moveTo(start); !ok {
			if drained {
				// As above: a draining member claims nothing.
				m.leaveOnRebalance(log, "partition assigned")
			}
			return nil // released meanwhile, the member failed, or its start is gone
		}
	}
	p.Open(m.stage)
	m.cm.Add(p.Claim)
	log.Debug("kafka partition claimed", slog.Int64("offset", start), slog.Int64("committed", committed))
	m.cm.Assigned(m.ctx, m.opts.Telemetry, p.Claim)
	r.run()

	// Stop dispatching: nothing more is delivered, what still waits in the
	// stage buffer is withdrawn and the read-ahead is dropped (the next
	// owner fetches them again).
	if n := p.Withdraw(); n > 0 {
		log.Debug("kafka partition withdrew its undispatched messages", slog.Int("messages", n))
	}
	p.Feed.Close()
	r.closeOwn()
	p.Release(log, m.opts.RevokeTimeout, m.hurry)
	m.commitFinal(p)
	log.Debug("kafka partition released", slog.Int64("committed", p.Committed.Load()))
	m.cm.Remove(p.Claim)
	m.cm.Revoked(m.ctx, m.opts.Telemetry, p.Claim)
	if m.draining() && sess.Context().Err() == nil {
		m.leaveOnRebalance(log, "partition revoked")
	}
	return nil
}

// startOffset returns where a new claim starts and whether it must be
// moved there (its consumer starts elsewhere): with BeginReset, a
// partition the group committed starts at InitialOffset's offset; with
// OffsetTimestamp, a partition without a committed offset starts at the
// first record at or after StartTime (after the newest when none is), found
// with ListOffsets requests by time and at the end as claim.StartOffsets
// says, so that a record appended during the lookup is not skipped.
//
// The lookup ends with ctx, the session's (a rebalance, the member leaving
// or closing), and after Config.Metadata.Timeout, whichever comes first: each
// request goes out on a connection of its own (listOffset), cut when it
// ends, so that an unresponsive cluster holds neither the rebalance nor
// Close for sarama's Net.ReadTimeout.
func (m *member) startOffset(ctx context.Context, pc sarama.ConsumerGroupClaim) (int64, bool, error) {
	init := pc.InitialOffset()
	if !m.needsLookup(init) {
		return init, false, nil
	}
	ctx, cancel := m.lookupContext(ctx)
	defer cancel()
	topic, part := pc.Topic(), pc.Partition()
	list := func(at int64) claim.Lister[int32] {
		return func(ctx context.Context, parts []int32) (map[int32]int64, error) {
			offs := make(map[int32]int64, len(parts))
			for _, p := range parts {
				off, err := m.listOffset(ctx, topic, p, at)
				if err != nil {
					return nil, err
				}
				offs[p] = off
			}
			return offs, nil
		}
	}
	var off int64
	var err error
	switch m.opts.InitialOffset {
	case OffsetEarliest:
		off, err = m.listOffset(ctx, topic, part, sarama.OffsetOldest)
	case OffsetTimestamp:
		var offs map[int32]int64
		end := func(ctx context.Context, parts []int32) (map[int32]int64, error) {
			if beforeEndListing != nil {
				beforeEndListing()
			}
			return list(sarama.OffsetNewest)(ctx, parts)
		}
		offs, err = claim.StartOffsets(ctx, []int32{part}, list(m.opts.StartTime.UnixMilli()), end)
		off = offs[part]
	default:
		off, err = m.listOffset(ctx, topic, part, sarama.OffsetNewest)
	}
	if err != nil {
		return 0, false, err
	}
	return off, off != init, nil
}

// needsLookup reports whether a new claim whose consumer starts at init
// (the group's committed offset, or sarama's Consumer.Offsets.Initial, <
// 0, when there is none) starts elsewhere, which startOffset looks up:
// with BeginReset, a committed partition; with OffsetTimestamp, a
// partition without a committed offset.
func (m *member) needsLookup(init int64) bool {
	hasCommitted := init >= 0
	return (m.opts.BeginOffset == BeginReset && hasCommitted) || (m.opts.InitialOffset == OffsetTimestamp && !hasCommitted)
}

// The waits between a claim's attempts to find where it starts
// (lookUpStart): the first, then twice as long each time up to the last,
// as the franz-go source's.
const (
	lookupFirstBackoff = time.Second
	lookupMaxBackoff   = 10 * time.Second
)

// errRevoked is the cause that ends a claim's start offset lookup when its
// partition is revoked while its session goes on (a cooperative
// rebalance closes the claim's channel).
var errRevoked = errors.New("kafka: partition revoked")

// errDraining is the cause that ends a claim's start offset lookup when
// the member drains.
var errDraining = errors.New("kafka: the member drains")

// lookUpStart returns where a new claim starts and whether it must be
// moved there (startOffset), and reports false when the claim starts
// nowhere: its session ended (ctx, a rebalance, the member leaving or
// closing), its partition was revoked, the member drains (the attempt
// under way and the wait for the next end at once: consumeClaim then
// ends the session, as a draining member claims nothing) or the member
// failed.
//
// An attempt that fails (no answer within Config.Metadata.Timeout, an
// error Kafka says to retry, a connection refused) is tried again, 1s
// later, then twice as long each time up to 10s, for as long as the
// claim lasts: the member stays in its group generation meanwhile, and
// the group's other claims go on. It logs one WARN line when the first
// attempt fails and one more each time the failed attempts double (the
// 2nd, 4th, 8th, ...), and one INFO line when an attempt succeeds after
// failed ones.
//
// An answer with an error Kafka says not to retry (refusedForGood: an
// authorization refusal, an invalid request, ...) is not tried again, as
// asking again changes nothing until an operator does: the member fails
// with it, wrapped in ErrDenied or ErrStartRefused (refusedStarts), with
// an ERROR line, and the claim ends, which ends the session; loop then
// joins no more, and Run returns the error, so that the pipeline's
// restart policy decides.
//
// While it looks, the claim's own consumer is paused, and its channel is
// read to notice a revoke (the channel closes): what it still hands over
// is dropped, and the claim then moves to its start as when it starts
// elsewhere.
func (m *member) lookUpStart(parent context.Context, claimed sarama.ConsumerGroupClaim, log *slog.Logger) (start int64, move, ok bool) {
	if !m.needsLookup(claimed.InitialOffset()) {
		return claimed.InitialOffset(), false, true
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	m.pauseClaim(claimed, true)
	var dropped bool
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case _, open := <-claimed.Messages():
				if !open {
					cancel(errRevoked)
					return
				}
				dropped = true
			case <-m.drainCh:
				cancel(errDraining)
				return
			case <-stop:
				return
			}
		}
	}()
	start, move, err := m.retryStart(ctx, claimed, log)
	close(stop)
	<-stopped
	switch {
	case err != nil:
		return 0, false, false
	case context.Cause(ctx) != nil:
		log.Debug("kafka partition released while its start offset was looked up", slog.Any("cause", context.Cause(ctx)))
		return 0, false, false
	case move || dropped:
		return start, true, true // moveTo pauses the claim's consumer (again)
	}
	m.pauseClaim(claimed, false)
	return start, false, true
}

// pauseClaim pauses or resumes fetching the partition of claimed, as
// reader.setPaused does for a claim that reads from its own consumer.
func (m *member) pauseClaim(claimed sarama.ConsumerGroupClaim, v bool) {
	ps, ok := claimed.(pauser)
	switch {
	case !ok:
		tp := map[string][]int32{claimed.Topic(): {claimed.Partition()}}
		if v {
			m.group.Pause(tp)
		} else {
			m.group.Resume(tp)
		}
	case v:
		ps.Pause()
	default:
		ps.Resume()
	}
}

// retryStart is lookUpStart's attempts. It returns an error once ctx has
// ended (the session, a revoke or a drain; logged at DEBUG) or the member
// failed (logged at ERROR).
func (m *member) retryStart(ctx context.Context, claimed sarama.ConsumerGroupClaim, log *slog.Logger) (int64, bool, error) {
	backoff := lookupFirstBackoff
	for failed := 0; ; {
		start, move, err := m.startOffset(ctx, claimed)
		if err == nil {
			if failed > 0 {
				log.Info("kafka partition start offset listed after failed attempts", slog.Int("failed_attempts", failed))
			}
			return start, move, nil
		}
		if ctx.Err() != nil {
			log.Debug("kafka partition released while its start offset was looked up", slog.Any("cause", context.Cause(ctx)),
				slog.Any("error", flat(err)))
			return 0, false, err
		}
		failed++
		if refusedForGood(err) {
			err = refusedStarts(err)
			log.Error("kafka start offsets refused; the member fails",
				slog.String("initial_offset", m.opts.InitialOffset), slog.Int("failed_attempts", failed), slog.Any("error", err))
			m.fail(err)
			return 0, false, err
		}
		if failed&(failed-1) == 0 {
			log.Warn("kafka partition start offset cannot be listed; trying again within the claim",
				slog.String("initial_offset", m.opts.InitialOffset), slog.Int("failed_attempts", failed),
				slog.Duration("in", backoff), slog.Any("error", flat(err)))
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			log.Debug("kafka partition released while its start offset was looked up", slog.Any("cause", context.Cause(ctx)))
			return 0, false, context.Cause(ctx)
		}
		backoff = min(2*backoff, lookupMaxBackoff)
	}
}

// listingRefused is a ListOffsets answer's error for one partition.
type listingRefused struct {
	topic string
	part  int32
	err   sarama.KError
}

func (e *listingRefused) Error() string {
	return fmt.Sprintf("partition %q/%d: %v", e.topic, e.part, e.err)
}

func (e *listingRefused) Unwrap() error { return e.err }

// refusedForGood reports whether err is refused for good: an
// authorization refusal wherever it comes from (denied: the ListOffsets
// answer, or the metadata or leader lookup before it), or a ListOffsets
// answer's error that Kafka says not to retry (kafkarefusal.RefusedForGoodCode:
// its code's kerr.Error has Retriable false, the table the franz-go
// source follows; an unknown code is kerr's UNKNOWN_SERVER_ERROR, not
// retriable either).
func refusedForGood(err error) bool {
	if denied(err) {
		return true
	}
	r, ok := errors.AsType[*listingRefused](err)
	return ok && kafkarefusal.RefusedForGoodCode(int16(r.err))
}

// denied reports whether err, or an error it wraps, is Kafka refusing the
// client's credentials or its permissions on a topic, the group or the
// cluster (kafkarefusal.Denied, which the franz-go source shares).
func denied(err error) bool { return kafkarefusal.Denied(err, kafkarefusal.Sarama) }

// refusedStarts is the member's error for err, a start offset listing the
// cluster refused for good: ErrDenied for an authorization refusal,
// ErrStartRefused for any other.
func refusedStarts(err error) error {
	if denied(err) {
		return fmt.Errorf("%w: listing start offsets: %w", ErrDenied, flat(err))
	}
	return fmt.Errorf("%w: %w", ErrStartRefused, flat(err))
}

// beforeEndListing, when set, runs in startOffset before the end offset is
// listed.
var beforeEndListing func()

// lookupContext is the context of a claim's start offset lookup: parent
// (the session's), ended after Config.Metadata.Timeout when it is set.
func (m *member) lookupContext(parent context.Context) (context.Context, context.CancelFunc) {
	if d := m.client.Config().Metadata.Timeout; d > 0 {
		return context.WithTimeout(parent, d)
	}
	return context.WithCancel(parent)
}

// listOffset asks the leader of topic/part for the offset at at (a
// timestamp in milliseconds, sarama.OffsetNewest or sarama.OffsetOldest)
// with one ListOffsets request, as sarama's GetOffset does (once more
// after a metadata refresh when it fails, unless the answer's error is
// one Kafka says not to retry), but on a connection of its own that is cut
// when ctx ends: sarama's requests take no context. It then returns an
// error wrapping ctx's. An answer's error for the partition is a
// *listingRefused.
func (m *member) listOffset(ctx context.Context, topic string, part int32, at int64) (int64, error) {
	off, err := m.listOffsetOnce(ctx, topic, part, at)
	if err == nil || ctx.Err() != nil || refusedForGood(err) {
		return off, err
	}
	if rerr := m.client.RefreshMetadata(topic); rerr != nil {
		return -1, rerr
	}
	return m.listOffsetOnce(ctx, topic, part, at)
}

func (m *member) listOffsetOnce(ctx context.Context, topic string, part int32, at int64) (int64, error) {
	leader, err := m.client.Leader(topic, part)
	if err != nil {
		return -1, err
	}
	cfg, conns := m.conns.Child(m.client.Config())
	defer conns.CutWhenDone(ctx)()
	b := sarama.NewBroker(leader.Addr())
	if err := b.Open(cfg); err != nil {
		return -1, lookupErr(ctx, err)
	}
	defer func() { _ = b.Close() }()
	req := sarama.NewOffsetRequest(cfg.Version)
	req.AddBlock(topic, part, at, 1)
	resp, err := b.GetAvailableOffsets(req)
	if err != nil {
		return -1, lookupErr(ctx, err)
	}
	block := resp.GetBlock(topic, part)
	switch {
	case block == nil:
		return -1, sarama.ErrIncompleteResponse
	case !errors.Is(block.Err, sarama.ErrNoError):
		return -1, &listingRefused{topic: topic, part: part, err: block.Err}
	case len(block.Offsets) != 1:
		return -1, sarama.ErrOffsetOutOfRange
	}
	return block.Offsets[0], nil
}

// lookupErr is err, a request's failure, wrapped in ctx's error when ctx
// ended (its connection was cut).
func lookupErr(ctx context.Context, err error) error {
	if cerr := context.Cause(ctx); cerr != nil {
		return fmt.Errorf("%w (%w)", cerr, flat(err))
	}
	return err
}

// reader moves records from sarama to the feed as permits allow.
type reader struct {
	p          *partition
	in         <-chan *sarama.ConsumerMessage // the claim's messages
	claimPause pauser
	log        *slog.Logger

	own       sarama.PartitionConsumer // set while rewound to redeliver
	ownErrors <-chan *sarama.ConsumerError
	paused    bool

	q claim.Queue[*sarama.ConsumerMessage] // read ahead
}

// setPaused pauses or resumes fetching the partition from whichever
// consumer is reading it.
func (r *reader) setPaused(v bool) {
	if v == r.paused {
		return
	}
	r.paused = v
	var ps pauser = r.claimPause
	if r.own != nil {
		ps = r.own
	}
	if ps == nil {
		tp := map[string][]int32{r.p.Topic: {r.p.Part}}
		if v {
			r.p.m.group.Pause(tp)
		} else {
			r.p.m.group.Resume(tp)
		}
		return
	}
	if v {
		ps.Pause()
	} else {
		ps.Resume()
	}
}

func (r *reader) closeOwn() {
	if r.own == nil {
		return
	}
	r.p.ownHW.Store(max(r.p.ownHW.Load(), r.own.HighWaterMarkOffset()))
	r.p.ownPC.Store(nil)
	r.own.AsyncClose()
	for range r.own.Messages() {
	}
	for range r.own.Errors() {
	}
	r.own, r.ownErrors = nil, nil
}

// stallTimeout is how long a claim with a full read-ahead and no permits
// leaves sarama's channel unread before it pauses the partition and reads
// the channel again (to notice a revoke while the processors are stuck).
const stallTimeout = 100 * time.Millisecond

// run returns when the claim is revoked or its session ends.
//
// Flow control: the claim delivers as many records as it holds permits, and
// keeps at most one window of records taken from sarama but not delivered.
// When that read-ahead is full, it stops reading sarama's channel, so sarama
// stops fetching the partition once its channel (half a window) is full: the
// steady state costs no pause / resume round trips, which would make sarama
// nap for 100ms whenever every partition of a broker is paused. If no permit
// comes back within stallTimeout (the processors are stuck), the claim
// pauses the partition and reads sarama's channel again, so that a revoke
// (which closes the channel) is still noticed; the read-ahead then grows at
// most by what sarama had already fetched.
func (r *reader) run() {
	p := r.p
	window := p.m.stage.Flow().MaxWindow()
	limit := window
	r.q = claim.NewQueue[*sarama.ConsumerMessage](2 * window)
	sessDone := p.sess.Context().Done()
	drainCh := p.m.drainCh
	draining, stalled := false, false
	stall := time.NewTimer(stallTimeout)
	stall.Stop()
	armed := false
	defer stall.Stop()
	for {
		if draining {
			r.q.Consume(r.q.Len())
		} else if r.q.Len() > 0 {
			if n := p.Take(r.q.Len()); n > 0 {
				r.deliver(n)
			}
		}
		p.ReadAhead.Store(int32(r.q.Len()))
		if stalled && r.q.Len() < limit {
			stalled = false
		}
		r.setPaused(draining || (stalled && int64(r.q.Len()) >= p.Permits()))

		var src <-chan *sarama.ConsumerMessage
		if draining || stalled || r.q.Len() < limit {
			src = r.in
			if r.own != nil {
				src = r.own.Messages()
			}
			if armed {
				stall.Stop()
				armed = false
			}
		} else if !armed {
			stall.Reset(stallTimeout)
			armed = true
		}
		var stallC <-chan time.Time
		if armed {
			stallC = stall.C
		}
		select {
		case msg, ok := <-src:
			if !ok {
				if r.own != nil {
					r.log.Warn("kafka redelivery consumer stopped; ending the claim")
				}
				return // revoked, or the session ended
			}
			if !draining {
				r.q.Push(msg)
				r.fill(src, limit)
				msg = r.q.Last()
			}
			if !r.readsAgain(msg) {
				return // the member failed
			}
		case <-stallC:
			armed = false
			stalled = true
		case msg, ok := <-r.inWhileOwn():
			// While rewound, the claim's own consumer is paused; what it
			// still hands over is fetched again by the rewound one.
			_ = msg
			if !ok {
				return
			}
		case err, ok := <-r.ownErrors:
			if !ok {
				r.ownErrors = nil
				break
			}
			if !r.ownFailed(err) {
				return // the member failed
			}
		case <-p.GrantCh:
		case <-p.RetryCh:
			if draining {
				continue
			}
			if !r.redeliver() {
				return
			}
		case <-drainCh:
			draining = true
			drainCh = nil
		case <-sessDone:
			return
		}
	}
}

// readsAgain notes that the consumer reading the claim's partition
// handed over records, msg the last: the partition reads. The errors the
// consumer of the member has queued by then are handled first
// (ownFailed), so that a failed fetch ends its run only with the records
// fetched after it: sarama queues a fetch's error before it fetches again,
// so any error of a fetch made before msg's is queued already, and the
// reader's select would otherwise take it, as often as not, after msg,
// beginning a run that the partition, reading again, never ends. It
// reports false when one of those errors fails the member.
func (r *reader) readsAgain(msg *sarama.ConsumerMessage) bool {
	if !r.queuedOwnErrors() {
		return false
	}
	p := r.p
	p.m.reach.Reading()
	p.m.cm.FetchedAgain(p.Topic, p.Part)
	p.Next.Store(msg.Offset + 1)
	return true
}

// queuedOwnErrors handles the errors the consumer of the member has
// queued, without waiting for more. It reports false when one fails the
// member.
func (r *reader) queuedOwnErrors() bool {
	for r.ownErrors != nil {
		select {
		case err, ok := <-r.ownErrors:
			if !ok {
				r.ownErrors = nil
			} else if !r.ownFailed(err) {
				return false
			}
		default:
			return true
		}
	}
	return true
}

// ownFailed handles an error of the consumer of the member that reads
// the claim's partition (a rewind's or a move's). An authorization
// refusal (denied: of the fetch, or of the metadata or leader lookup
// before it), or a fetch answered with another error Kafka says not to
// retry (fetchRefused), fails the member, with an ERROR line, and ownFailed reports
// false: fetching again changes nothing until an operator does; so does
// a fetch that cannot be decoded (corruptBatch: failCorrupt). Any
// other error is sarama's to retry (its consumer fetches again after
// Consumer.Retry.Backoff): it is logged as the group's consumer errors
// are, in the member's runs of failed fetches (claim.Member.FetchFailed:
// one WARN line when a run begins, whatever the error's text next, one
// INFO line when the partition reads again).
func (r *reader) ownFailed(err *sarama.ConsumerError) bool {
	if fetchRefused(err) {
		ferr := refusedFetch(r.p.Topic, r.p.Part, err.Err)
		r.log.Error("kafka partition fetch refused; the member fails", slog.Any("error", ferr))
		r.p.m.fail(ferr)
		return false
	}
	if corruptBatch(err.Err) {
		r.p.m.failCorrupt(r.p.Topic, r.p.Part, r.p.Next.Load(), err.Err)
		return false
	}
	r.p.m.cm.FetchFailed(r.p.Topic, r.p.Part, flat(err.Err))
	return true
}

// refusedFetch is the member's error for err, a fetch of topic/part (or
// the metadata or leader lookup it needs) refused for good: ErrDenied
// for an authorization refusal, ErrFetchRefused for any other.
func refusedFetch(topic string, part int32, err error) error {
	if denied(err) {
		return fmt.Errorf("%w: fetching partition %q/%d: %w", ErrDenied, topic, part, flat(err))
	}
	return fmt.Errorf("%w: fetching partition %q/%d: %w", ErrFetchRefused, topic, part, flat(err))
}

// fetchRefused reports whether err, a fetch's error, is one to stop
// fetching for: an authorization refusal wherever it comes from (denied:
// the fetch, or the metadata or leader lookup before it), or a Fetch
// answer's error Kafka says not to retry but for UNKNOWN_SERVER_ERROR,
// which brokers also send for passing faults, and OFFSET_OUT_OF_RANGE,
// which Consumer.Group.ResetInvalidOffsets governs
// (kafkarefusal.FetchRefused, which the franz-go source shares).
func fetchRefused(err error) bool {
	return denied(err) || kafkarefusal.FetchRefused(err, kafkarefusal.Sarama)
}

// corruptBatch reports whether err, a claim's fetch error, says that the
// fetched bytes cannot be decoded (kafkarefusal.SaramaCorrupt: a
// sarama.PacketDecodingError, or the broker's CORRUPT_MESSAGE). Either
// is returned again by each fetch from the same offset.
func corruptBatch(err error) bool { return kafkarefusal.SaramaCorrupt(err) }

// corruptFetch is the member's error for err, a fetch of topic/part from
// offset at (-1: not known) that cannot be decoded (corruptBatch); one past
// sarama.MaxResponseSize says so (kafkarefusal.CorruptFetch).
func corruptFetch(topic string, part int32, at int64, err error) error {
	return kafkarefusal.CorruptFetch(ErrCorruptBatch, topic, part, at, flat(err))
}

// inWhileOwn returns the claim's channel while a rewound consumer reads the
// partition (to notice the revoke), nil otherwise.
func (r *reader) inWhileOwn() <-chan *sarama.ConsumerMessage {
	if r.own == nil {
		return nil
	}
	return r.in
}

// fill takes what src already holds, without waiting, up to limit.
func (r *reader) fill(src <-chan *sarama.ConsumerMessage, limit int) {
	for r.q.Len() < limit {
		select {
		case msg, ok := <-src:
			if !ok {
				return // seen again by the select in run
			}
			r.q.Push(msg)
		default:
			return
		}
	}
}

// deliver hands the first n queued records to the feed.
func (r *reader) deliver(n int) {
	claim.Deliver(r.p.Claim, r.q.Head(n), saramaRecord, saramaHeaders)
	r.q.Consume(n)
}

func saramaRecord(m *sarama.ConsumerMessage) claim.Record {
	return claim.Record{Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp, Headers: len(m.Headers)}
}

func saramaHeaders(dst []claim.Header, m *sarama.ConsumerMessage) []claim.Header {
	for _, h := range m.Headers {
		dst = append(dst, claim.Header{Key: h.Key, Value: h.Value})
	}
	return dst
}

// redeliver rewinds the partition to the lowest failed offset: what was
// fetched after it is dropped, and after RedeliveryBackoff a consumer of the
// member reads the partition again from there. It reports false when the
// claim ended meanwhile.
func (r *reader) redeliver() bool {
	p := r.p
	at := p.RetryAt()
	if at < 0 {
		return true
	}
	// What was fetched after the failed message is dropped: the read-ahead,
	// and what still waits in the stage buffer.
	r.q.Consume(r.q.Len())
	p.Withdraw()
	r.closeOwn()
	r.paused = false
	r.setPaused(true)
	p.LogRewind(r.log, at, p.m.opts.RedeliveryBackoff)
	t := time.NewTimer(p.m.opts.RedeliveryBackoff)
	defer t.Stop()
	sessDone := p.sess.Context().Done()
wait:
	for {
		select {
		case _, ok := <-r.in:
			if !ok {
				return false
			}
		case <-t.C:
			break wait
		case <-sessDone:
			return false
		case <-p.m.drainCh:
			return true // draining: nothing more is delivered anyway
		}
	}
	if at = p.TakeRetry(); at < 0 {
		return true
	}
	pc, ok := r.rewind(at)
	if !ok {
		return false
	}
	if pc != nil {
		r.setOwn(pc)
	}
	return true
}

// rewind opens the consumer of the member that reads the claim's
// partition from at on, for a redelivery (open, with rewinding).
func (r *reader) rewind(at int64) (sarama.PartitionConsumer, bool) {
	return r.open(at, &rewinding)
}

// opening is what a consumer of the member is opened for (open): a
// redelivery's rewind or a new claim's move to its start offset. It
// names the log lines and the member's error.
type opening struct {
	retrying   string // WARN: an attempt failed, tried again
	opened     string // INFO: opened after failed attempts
	refused    string // ERROR: refused for good, the member fails
	outOfRange string // ERROR: at is out of the partition's range
	// fail is the member's error for err, an opening at at the cluster
	// refused for good.
	fail func(at int64, err error) error
}

var (
	rewinding = opening{
		retrying:   "kafka partition cannot be rewound; trying again within the claim",
		opened:     "kafka partition rewound after failed attempts",
		refused:    "kafka partition rewind refused; the member fails",
		outOfRange: "kafka partition cannot be rewound; ending the claim so that the group resumes from the committed offset",
		fail:       refusedRewind,
	}
	moving = opening{
		retrying:   "kafka partition cannot be moved to its start offset; trying again within the claim",
		opened:     "kafka partition moved to its start offset after failed attempts",
		refused:    "kafka partition start offset refused; the member fails",
		outOfRange: "kafka partition cannot be moved to its start offset; ending the claim so that the group rejoins",
		fail:       refusedMove,
	}
)

// open opens the consumer of the member that reads the claim's partition
// from at on (consumePartition), for what o says. It reports false when
// the claim ends instead: its session ended or it was revoked (logged at
// DEBUG), the member failed, or at is out of the partition's offset range
// (the claim ends and the group rejoins: a rewind's failed record is
// gone, and the group resumes from the committed offset, where sarama's
// claim starts as Consumer.Group.ResetInvalidOffsets says; a move's start
// is looked up again). It returns no consumer and true when the member
// drains meanwhile (nothing more is delivered).
//
// An attempt that fails otherwise (no answer within
// Config.Metadata.Timeout, an error Kafka says to retry, a connection
// refused) is tried again as a new claim's start offset lookup is
// (lookUpStart): 1s later, then twice as long each time up to 10s, for as
// long as the claim lasts, the partition paused and the member in its
// group generation, with one WARN line at the first failed attempt and at
// each doubling of the failed attempts and one INFO line once an attempt
// succeeds. An answer with an error Kafka says not to retry
// (refusedForGood) is not tried again: the member fails with it, wrapped
// in ErrDenied, or in ErrRewindRefused (refusedRewind) or ErrStartRefused
// (refusedMove), with an ERROR line, so that Run returns it rather than
// the group rejoining for as long as the refusal lasts.
func (r *reader) open(at int64, o *opening) (sarama.PartitionConsumer, bool) {
	p := r.p
	backoff := lookupFirstBackoff
	for failed := 0; ; {
		pc, err := r.consumePartition(at)
		if err == nil {
			if failed > 0 {
				r.log.Info(o.opened, slog.Int64("offset", at), slog.Int("failed_attempts", failed))
			}
			return pc, true
		}
		if errors.Is(err, context.Canceled) || p.sess.Context().Err() != nil {
			r.log.Debug("kafka partition released while its consumer opened", slog.Int64("offset", at), slog.Any("error", flat(err)))
			return nil, false
		}
		failed++
		switch {
		case refusedForGood(err):
			err = o.fail(at, err)
			r.log.Error(o.refused, slog.Int64("offset", at), slog.Int("failed_attempts", failed), slog.Any("error", err))
			p.m.fail(err)
			return nil, false
		case errors.Is(err, sarama.ErrOffsetOutOfRange):
			r.openFailed(o.outOfRange, at, err)
			return nil, false
		}
		if failed&(failed-1) == 0 {
			r.log.Warn(o.retrying, slog.Int64("offset", at), slog.Int("failed_attempts", failed),
				slog.Duration("in", backoff), slog.Any("error", flat(err)))
		}
		if ok, drained := r.waitRetry(backoff); !ok || drained {
			return nil, ok
		}
		backoff = min(2*backoff, lookupMaxBackoff)
	}
}

// waitRetry waits d before open's next attempt. It reports false when
// the claim ended meanwhile (its session, or a revoke closing its
// channel, whose records are dropped: the rewind reads them again), and
// drained when the member drains.
func (r *reader) waitRetry(d time.Duration) (ok, drained bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case _, open := <-r.in:
			if !open {
				return false, false
			}
		case <-t.C:
			return true, false
		case <-r.p.sess.Context().Done():
			return false, false
		case <-r.p.m.drainCh:
			return true, true
		}
	}
}

// refusedRewind is the member's error for err, a rewind to at the
// cluster refused for good: ErrDenied for an authorization refusal,
// ErrRewindRefused for any other.
func refusedRewind(at int64, err error) error {
	if denied(err) {
		return fmt.Errorf("%w: rewinding to offset %d: %w", ErrDenied, at, flat(err))
	}
	return fmt.Errorf("%w: to offset %d: %w", ErrRewindRefused, at, flat(err))
}

// refusedMove is the member's error for err, a new claim's move to its
// start offset at the cluster refused for good: ErrDenied for an
// authorization refusal, ErrStartRefused for any other (the move applies
// the start offset, as part of starting the claim).
func refusedMove(at int64, err error) error {
	if denied(err) {
		return fmt.Errorf("%w: moving to start offset %d: %w", ErrDenied, at, flat(err))
	}
	return fmt.Errorf("%w: moving to start offset %d: %w", ErrStartRefused, at, flat(err))
}

// setOwn makes pc the consumer the claim reads (the claim's own is
// paused).
func (r *reader) setOwn(pc sarama.PartitionConsumer) {
	r.own, r.ownErrors = pc, pc.Errors()
	r.p.ownPC.Store(&ownConsumer{pc})
	r.paused = false
}

// consumePartition opens a consumer of the member that reads the claim's
// partition from offset at on. sarama's ConsumePartition first lists the
// partition's offset range (two ListOffsets requests, each sent once more
// after a metadata refresh when it fails); here each goes out as
// listOffset sends it, on a connection of its own, and the listing ends
// with the session, with the claim's revoke (its channel closing) and
// after Config.Metadata.Timeout (lookupContext), whichever comes first, so
// that a cluster that does not answer holds neither the claim nor the
// rebalance for sarama's Net.ReadTimeout. The claim's own consumer is
// paused meanwhile, and what it still hands over is dropped (the claim
// reads from at on).
func (r *reader) consumePartition(at int64) (sarama.PartitionConsumer, error) {
	p := r.p
	ctx, cancel := p.m.lookupContext(p.sess.Context())
	defer cancel()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case _, ok := <-r.in:
				if !ok {
					cancel() // revoked
					return
				}
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	return p.m.lookups.consumePartition(ctx, p.m.consumer, p.Topic, p.Part, at)
}

// openFailed logs why a consumer of the member could not be opened: at
// ERROR, unless the claim ended meanwhile (its session or the claim
// itself), which is no failure.
func (r *reader) openFailed(msg string, at int64, err error) {
	if errors.Is(err, context.Canceled) {
		r.log.Debug("kafka partition released while its consumer opened", slog.Int64("offset", at), slog.Any("error", flat(err)))
		return
	}
	r.log.Error(msg, slog.Int64("offset", at), slog.Any("error", flat(err)))
}

// offsetClient is the client of the member's own consumer: sarama's, but
// for GetOffset, which the consumer calls only as it opens a partition
// (consumePartition) and which goes through listOffset with that
// partition's lookup context.
type offsetClient struct {
	sarama.Client
	list func(ctx context.Context, topic string, part int32, at int64) (int64, error) // listOffset

	mu   sync.Mutex
	ctxs map[topicPart]*lookup
}

type topicPart struct {
	topic string
	part  int32
}

// lookup is the context of one partition's consumePartition.
type lookup struct{ ctx context.Context }

// consumePartition calls consumer.ConsumePartition with ctx as the context
// of the offset lookups it makes.
func (c *offsetClient) consumePartition(ctx context.Context, consumer sarama.Consumer, topic string, part int32, at int64) (sarama.PartitionConsumer, error) {
	k, l := topicPart{topic, part}, &lookup{ctx}
	c.mu.Lock()
	c.ctxs[k] = l
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.ctxs[k] == l {
			delete(c.ctxs, k)
		}
		c.mu.Unlock()
	}()
	return consumer.ConsumePartition(topic, part, at)
}

// GetOffset lists topic/part's offset at at with listOffset, in the
// context of the partition's consumePartition; sarama's own request when
// none runs.
func (c *offsetClient) GetOffset(topic string, part int32, at int64) (int64, error) {
	c.mu.Lock()
	l := c.ctxs[topicPart{topic, part}]
	c.mu.Unlock()
	if l == nil {
		return c.Client.GetOffset(topic, part, at)
	}
	return c.list(l.ctx, topic, part, at)
}

// moveTo makes the claim read from offset at on: the claim's consumer,
// which started elsewhere, is paused and a consumer of the member reads the
// partition instead, as for a redelivery, opened as a rewind's is (open,
// with moving: tried again within the claim, the member failing when the
// cluster refuses for good). It reports false when the claim ends
// instead, and drained when the member drains meanwhile (no consumer was
// opened: the claim starts nowhere).
func (r *reader) moveTo(at int64) (ok, drained bool) {
	r.paused = false
	r.setPaused(true)
	pc, ok := r.open(at, &moving)
	if !ok || pc == nil {
		return false, ok
	}
	r.setOwn(pc)
	return true, false
}
