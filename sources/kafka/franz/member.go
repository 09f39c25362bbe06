package franz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/lifecycle"
)

// member is one consumer-group member: one producer stage's Run, with its
// own franz-go client.
type member struct {
	src   *Source
	opts  *Options
	stage *producer.Stage[[]byte]
	log   *slog.Logger
	cl    atomic.Pointer[kgo.Client] // set once NewClient returns, or by the first callback
	cm    *claim.Member
	reset kgo.Offset
	// reach reports the stage degraded while the member cannot read from
	// the cluster, and running again once it reads (kafkareach.Reach).
	reach kafkareach.Reach
	// recycle says whether the partitions recycle each record once it is
	// delivered (see recyclable). Set once NewClient returns: a partition
	// assigned before does not recycle what it delivers until then.
	recycle atomic.Bool

	// commits is the client the member's commits go through, outside the
	// group (see send), and its leave when Close ran out of time
	// (leaveCutShort); closed once the member's commits are over. Its
	// context ends when the member has closed: each request has its own.
	commits *kgo.Client
	// level is the isolation level of the member's client (ClientOptions'
	// kgo.FetchIsolationLevel): 1 reads committed, 0 uncommitted.
	level int8
	// instanceID is the static member id of ClientOptions, nil without.
	instanceID *string
	// strategies are the names of the balancers the member offers the
	// group, for the error of a join the group refuses for them.
	strategies []string

	ctx        context.Context // cancelled when the member has closed
	cancel     context.CancelFunc
	pollCtx    context.Context // cancelled when the member drains: stop polling
	pollCancel context.CancelFunc

	drainOnce sync.Once
	drainCh   chan struct{} // closed when Run's ctx ends: stop delivering
	hurryOnce sync.Once
	hurry     chan struct{}   // closed when Close's ctx ends: stop waiting
	hurryCtx  context.Context // cancelled with hurry: commits give up too
	hurryStop context.CancelFunc
	closeOnce sync.Once
	failOnce  sync.Once
	failed    chan error
	pollDone  chan struct{}
	stopped   chan struct{} // closed when the member closes: the commit loop ends
	wg        sync.WaitGroup

	// groupRefusals picks which joins refused for the group's strategies
	// the poll loop logs at WARN (the first of a run, until records come
	// in); the poll loop's own.
	groupRefusals claim.FailureRun

	// blocked counts the claims whose read-ahead is full: the poll loop
	// waits for room (signalled when it falls to 0) before it polls.
	blocked atomic.Int32
	room    chan struct{}

	mu    sync.Mutex
	parts map[topicPartition]*partition
	// releasing holds the claims taken from parts whose release is under
	// way (take, release): a revoke of one of them waits for it.
	releasing map[topicPartition]*partition
	closing   bool // no new claims
	// moved is closed, and replaced, each time the member's session moves
	// on (moveOn): a final commit the group refused as it rebalanced
	// waits for it to go out again (commitFinal).
	moved chan struct{}
}

type topicPartition struct {
	topic string
	part  int32
}

// String is "topic/partition", as log lines name partitions.
func (tp topicPartition) String() string { return tp.topic + "/" + strconv.Itoa(int(tp.part)) }

// startMember connects a member. It returns nil, nil when ctx ended first.
func (s *Source) startMember(runCtx context.Context, stage *producer.Stage[[]byte]) (*member, error) {
	if s.live.Closed() {
		return nil, ErrClosed
	}
	log := lifecycle.Logger(s.opts.Logger, stage).With(slog.String("group", s.opts.GroupID))
	if err := s.checkBrokers(runCtx, log); err != nil || runCtx.Err() != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	pollCtx, pollCancel := context.WithCancel(ctx)
	hurryCtx, hurryStop := context.WithCancel(ctx)
	m := &member{
		src:        s,
		opts:       &s.opts,
		stage:      stage,
		log:        log,
		cm:         claim.NewMember(s.opts.GroupID, stage.Name(), log, s.opts.CommitMode == CommitOnAck),
		reach:      kafkareach.Reach{Health: stage.Health()},
		reset:      s.opts.resetOffset(),
		ctx:        ctx,
		cancel:     cancel,
		pollCtx:    pollCtx,
		pollCancel: pollCancel,
		drainCh:    make(chan struct{}),
		hurry:      make(chan struct{}),
		hurryCtx:   hurryCtx,
		hurryStop:  hurryStop,
		failed:     make(chan error, 1),
		pollDone:   make(chan struct{}),
		stopped:    make(chan struct{}),
		parts:      make(map[topicPartition]*partition),
		releasing:  make(map[topicPartition]*partition),
		moved:      make(chan struct{}),
		room:       make(chan struct{}, 1),
	}
	opts := append(append([]kgo.Opt{kgo.FetchMaxWait(DefaultFetchMaxWait)}, s.opts.ClientOptions...),
		kgo.SeedBrokers(s.opts.Brokers...),
		kgo.ConsumerGroup(s.opts.GroupID),
		kgo.ConsumeTopics(s.opts.Topics...),
		kgo.DisableAutoCommit(),
		// Transaction markers are returned, to be skipped (partition.run):
		// the commit then moves past a partition's last one.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(m.reset),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
		kgo.AdjustFetchOffsetsFn(m.adjust),
		kgo.WithPools(&s.records),
		// Close's context ending cancels the client's own (hurryCtx): a
		// leave or commit that a hung cluster does not answer gives up.
		kgo.WithContext(hurryCtx),
		// Each response the client reads is an answer from the cluster,
		// which ends a degrade the member's session outlived
		// (kafkareach.Reach); added to the hooks of ClientOptions.
		kgo.WithHooks(heardHook{&m.reach}),
	)
	if b := s.opts.balancer(); b != nil {
		opts = append(opts, kgo.Balancers(b))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: %w", ErrConnect, claim.Flat(err))
	}
	m.cl.CompareAndSwap(nil, cl)
	m.recycle.Store(recyclable(cl))
	m.level, _ = cl.OptValue(kgo.FetchIsolationLevel).(int8)
	// Read by the commit loop's commits, which start below (a final
	// commit, which a callback may already make, does not read them).
	m.cm.Rebalancing = refusedByRebalance
	m.cm.RebalanceTimeout, _ = cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	if bs, ok := cl.OptValue(kgo.Balancers).([]kgo.GroupBalancer); ok {
		for _, b := range bs {
			m.strategies = append(m.strategies, b.ProtocolName())
		}
	}
	if id := cl.OptValues(kgo.InstanceID); len(id) == 2 {
		if s, ok := id[0].(string); ok && id[1] == true {
			m.instanceID = &s
		}
	}
	if m.commits, err = m.sideClient(kgo.MaxVersions(commitVersions(cl)), kgo.WithContext(ctx)); err != nil {
		m.abort()
		return nil, fmt.Errorf("%w: %w", ErrConnect, claim.Flat(err))
	}
	if beforeTopicCheck != nil {
		beforeTopicCheck(runCtx)
	}
	tctx, tcancel := context.WithTimeout(runCtx, s.opts.ConnectTimeout)
	err = checkTopics(tctx, cl, s.opts.Topics)
	tcancel()
	if runCtx.Err() != nil {
		// The stage stopped while the cluster was asked: the member would
		// only join the group to leave it.
		m.abort()
		return nil, nil
	}
	if err != nil {
		m.abort()
		return nil, err
	}
	if !s.live.Add(m) {
		m.abort()
		return nil, ErrClosed
	}
	m.wg.Go(func() {
		m.cm.CommitLoop(m.opts.CommitInterval, m.stopped, func() {
			ctx, cancel := context.WithTimeout(m.hurryCtx, m.opts.RevokeTimeout)
			defer cancel()
			_ = m.commit(ctx, nil) // recorded and logged
		})
	})
	m.wg.Go(func() { m.cm.HighWaterLoop(m.pollCtx, m.opts.HighWaterInterval, m.listHighWaters) })
	go m.poll()
	return m, nil
}

// recyclable reports whether a record may be recycled (kgo.Record.Recycle)
// as soon as its message is delivered: the message carries copies of the
// record's fields, but its value and key are the record's slices. They
// stay valid unless one of the client's pools implements
// kgo.PoolDecompressBytes (set by the user through ClientOptions): the
// last record of a compressed batch recycled would then put the buffer
// they point into back in that pool, zeroed, while the messages are still
// in the pipeline. Records are not recycled then.
func recyclable(cl *kgo.Client) bool {
	pools, _ := cl.OptValue(kgo.WithPools).([]kgo.Pool)
	for _, p := range pools {
		if _, ok := p.(kgo.PoolDecompressBytes); ok {
			return false
		}
	}
	return true
}

// client is the member's franz-go client. The partition callbacks may run
// before NewClient has returned to startMember: each stores the client it
// was given first.
func (m *member) client() *kgo.Client { return m.cl.Load() }

// abort closes a member that never started polling. Its client may have
// joined the group meanwhile, and the cluster may not answer the join or
// sync still in flight: franz-go's leave would wait for it, and the
// stage's Run with it, so the member gives that leave up at once (as
// Close does past its deadline) and leaves on its commit client, waiting
// at most claim.LeaveGrace for the answer (leaveCutShort).
func (m *member) abort() {
	m.Drain()
	ps, _ := m.take(nil)
	m.release(ps, false)
	m.wg.Wait() // a start offset lookup (startLater), which release ended
	m.hurryUp()
	m.client().Close()
	if m.commits != nil {
		m.leaveCutShort()
		m.commits.Close()
	}
	m.cancel()
}

// hurryUp stops every wait of the member's closing (hurry) and ends the
// client's context (hurryCtx): the requests the client waits on, and its
// own leave, give up.
func (m *member) hurryUp() {
	m.hurryOnce.Do(func() { close(m.hurry); m.hurryStop() })
}

// Drain stops polling and delivering (Run's ctx ended): the member leaves
// the group at Close, or at the next rebalance if one comes first
// (assigned).
func (m *member) Drain() {
	m.drainOnce.Do(func() {
		m.mu.Lock()
		m.closing = true
		m.mu.Unlock()
		close(m.drainCh)
		m.pollCancel()
	})
}

func (m *member) fail(err error) {
	m.failOnce.Do(func() { m.failed <- err })
}

// Failed receives the error fail reported: the member cannot go on.
func (m *member) Failed() <-chan error { return m.failed }

// Stats is the member's snapshot.
func (m *member) Stats() claim.MemberStats { return m.cm.Stats() }

// undecided reports whether a claim has polled records its reader has not
// yet taken in and decided on: polling again before it has could hand it
// more than its window.
func (m *member) undecided() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.parts {
		if p.undecided() {
			return true
		}
	}
	return false
}

// pollMax bounds the records one poll returns.
const pollMax = 10_000

// poll moves polled records to their partitions' readers, until the member
// drains.
//
// A fetch error of a partition (or of its topic's metadata) that refuses
// the member's credentials or permissions (denied) fails the member at
// once, with an ERROR line and an error wrapping ErrDenied that names the
// partition: fetching again changes nothing until an operator does; so
// does another error Kafka says not to retry (kafkarefusal.FetchRefused:
// UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD, ...), with ErrFetchRefused,
// but for UNKNOWN_SERVER_ERROR, which brokers also send for passing
// faults; so does a partition's fetch that franz-go cannot decode
// (undecodable), with ErrCorruptBatch naming the partition and the
// offset of the batch, before the poll's records are handed over. Any
// other is franz-go's to fetch again, and is logged at WARN once per run
// of failures of the partition (claim.Member.FetchFailed: the first, or
// one after the partition's claim was handed records since, whatever the
// error's text meanwhile), not once per poll. A group error fails the
// member when denied, or after maxConsumeFailures polls in a row without
// records; a join
// refused for the group's strategies (INCONSISTENT_GROUP_PROTOCOL) is
// logged at WARN once per run of refusals (m.groupRefusals), the others
// at DEBUG.
func (m *member) poll() {
	defer close(m.pollDone)
	failures := 0
	for {
		for m.blocked.Load() > 0 || m.undecided() {
			select {
			case <-m.room:
			case <-m.pollCtx.Done():
				return
			}
		}
		fs := m.client().PollRecords(m.pollCtx, pollMax)
		if m.pollCtx.Err() != nil || fs.IsClientClosed() {
			return
		}
		var groupErr, refused, corrupt error
		topicGone := false
		fs.EachError(func(topic string, part int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
				topicGone = true
			}
			if topic == "" {
				level := slog.LevelWarn
				if errors.Is(err, kerr.InconsistentGroupProtocol) {
					err = claim.GroupProtocol(m.opts.GroupID, m.strategies, claim.Flat(err))
					if !m.groupRefusals.Log(err, 0) {
						level = slog.LevelDebug
					}
				}
				groupErr = err
				m.log.Log(context.Background(), level, "kafka consumer error", slog.String("topic", topic), slog.Int("partition", int(part)), slog.Any("error", claim.Flat(err)))
				return
			}
			if denied(err) || kafkarefusal.FetchRefused(err, kafkarefusal.Franz) {
				// A refusal of a permission the fetch needs (or of the
				// metadata it needs), or another answer Kafka says not to
				// retry (but for UNKNOWN_SERVER_ERROR, which brokers also
				// send for passing faults, and OFFSET_OUT_OF_RANGE, which
				// franz-go resets): fetching again changes nothing until
				// an operator does.
				if refused == nil {
					refused = refusedFetch(topic, part, err)
				}
				return
			}
			if undecodable(err) {
				// The same bytes come back with each fetch from this
				// offset; skipping them would lose their records.
				if corrupt == nil {
					corrupt = corruptFetch(topic, part, m.fetchOffset(topic, part), err)
				}
				return
			}
			m.cm.FetchFailed(topic, part, claim.Flat(err))
		})
		if refused != nil {
			m.log.Error("kafka fetch refused; the member fails", slog.Any("error", refused))
			m.fail(refused)
			return
		}
		if corrupt != nil {
			m.log.Error("kafka partition fetch cannot be decoded; the member fails", slog.Any("error", corrupt))
			m.fail(corrupt)
			return
		}
		if topicGone {
			// A topic went away: fail now, so that the pipeline's restart
			// policy decides, rather than polling it forever.
			ctx, cancel := context.WithTimeout(m.pollCtx, m.opts.ConnectTimeout)
			err := checkTopics(ctx, m.client(), m.opts.Topics)
			cancel()
			if errors.Is(err, ErrUnknownTopic) || errors.Is(err, ErrDenied) {
				m.fail(err)
				return
			}
		}
		got := false
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if len(ftp.Records) == 0 {
				return
			}
			got = true
			m.cm.FetchedAgain(ftp.Topic, ftp.Partition)
			m.mu.Lock()
			p := m.parts[topicPartition{ftp.Topic, ftp.Partition}]
			m.mu.Unlock()
			if p != nil {
				p.push(ftp.Records, readableEnd(m.level, &ftp))
			} else {
				m.drop(ftp.Records) // no claim reads them
			}
		})
		switch {
		case got:
			failures, m.groupRefusals = 0, claim.FailureRun{}
			m.reach.Reading()
		case groupErr != nil:
			// A refusal of the credentials or of a permission fails at
			// once: polling again changes nothing until an operator does.
			if denied(groupErr) {
				m.fail(fmt.Errorf("%w: %w", ErrDenied, claim.Flat(groupErr)))
				return
			}
			if failures++; failures >= maxConsumeFailures {
				m.fail(fmt.Errorf("%w: %w", ErrConsume, claim.Flat(groupErr)))
				return
			}
			// franz-go rejoins by itself after each: the second failed
			// join in a row degrades the stage until the member reads.
			m.reach.SessionFailed(claim.Flat(groupErr))
		}
	}
}

// heardHook tells a member's reach of each response its client reads
// without error (kgo.HookBrokerRead): long-poll fetches and heartbeats
// answer even on an idle topic.
type heardHook struct{ reach *kafkareach.Reach }

// OnBrokerRead calls Heard for a response read whole.
func (h heardHook) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		h.reach.Heard()
	}
}

// denied reports whether err, or an error it wraps, is Kafka refusing the
// client's credentials or its permissions on a topic, the group or the
// cluster (kafkarefusal.Denied, which the sarama source shares).
func denied(err error) bool { return kafkarefusal.Denied(err, kafkarefusal.Franz) }

// refusedForGood reports whether err, or an error it wraps, is an error
// Kafka says not to retry (kafkarefusal.RefusedForGood).
func refusedForGood(err error) bool { return kafkarefusal.RefusedForGood(err, kafkarefusal.Franz) }

// refusedFetch is the member's error for err, a fetch of topic/part (or
// the metadata it needs, part -1 for the whole topic) refused for good:
// ErrDenied for an authorization refusal, ErrFetchRefused for any other.
func refusedFetch(topic string, part int32, err error) error {
	if denied(err) {
		return fmt.Errorf("%w: fetching partition %q/%d: %w", ErrDenied, topic, part, claim.Flat(err))
	}
	return fmt.Errorf("%w: fetching partition %q/%d: %w", ErrFetchRefused, topic, part, claim.Flat(err))
}

// undecodable reports whether err, a partition's fetch error in a poll,
// is franz-go's for fetched bytes it cannot decode: a batch whose CRC or
// length does not match, an unknown magic, a compression that does not
// decompress (kgo.ProcessFetchPartition's errors, which have no type of
// their own), or one that decompresses past MaxDecompressBatchBytes
// (*kgo.ErrDecompressTooLarge, after which franz-go stops fetching the
// partition). franz-go fetches the same bytes again for each of them (or
// none, for the last), so they are told apart from the kinds of fetch
// error it does type, which are not: a broker's error code (*kerr.Error,
// which poll classifies), a data loss notice (*kgo.ErrDataLoss, after
// which consumption goes on), the client closing or the poll ending. A
// broker that keeps leaving the partition out of the group's OffsetFetch
// answers, after which franz-go gives the partition up, is reported the
// same way.
func undecodable(err error) bool {
	if _, ok := errors.AsType[*kgo.ErrDecompressTooLarge](err); ok {
		return true
	}
	if _, ok := errors.AsType[*kerr.Error](err); ok {
		return false
	}
	if _, ok := errors.AsType[*kgo.ErrDataLoss](err); ok {
		return false
	}
	return !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// corruptFetch is the member's error for err, a fetch of topic/part from
// offset at (-1: not known) that cannot be decoded (undecodable).
func corruptFetch(topic string, part int32, at int64, err error) error {
	if at < 0 {
		return fmt.Errorf("%w: fetching partition %q/%d: %w", ErrCorruptBatch, topic, part, claim.Flat(err))
	}
	return fmt.Errorf("%w: fetching partition %q/%d from offset %d: %w", ErrCorruptBatch, topic, part, at, claim.Flat(err))
}

// fetchOffset is where the client fetches topic/part from: the offset
// after the last record polled from it (kgo.Client.UncommittedOffsets),
// or, before the first, where the member's claim of it starts; -1 when
// neither is known.
func (m *member) fetchOffset(topic string, part int32) int64 {
	if eo, ok := m.client().UncommittedOffsets()[topic][part]; ok && eo.Offset >= 0 {
		return eo.Offset
	}
	m.mu.Lock()
	p := m.parts[topicPartition{topic, part}]
	m.mu.Unlock()
	if p == nil {
		return -1
	}
	return p.Next.Load()
}

// assigned is the client's OnPartitionsAssigned: each partition becomes a
// claim with its feed and its reader.
func (m *member) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	m.cl.CompareAndSwap(nil, cl)
	memberID, gen := cl.GroupMetadata()
	// Every partition the member claims from now on: under
	// cooperative-sticky, assigned holds only those it gains.
	m.mu.Lock()
	kept := len(m.parts)
	claims := make(map[string][]int32, len(assigned))
	for tp := range m.parts {
		claims[tp.topic] = append(claims[tp.topic], tp.part)
	}
	m.mu.Unlock()
	for t, ps := range assigned {
		claims[t] = append(claims[t], ps...)
	}
	for _, ps := range claims {
		slices.Sort(ps)
	}
	m.cm.NoteSession(memberID, gen, claims)
	m.reach.SessionStarted()
	m.moveOn() // the generation is synced: a refused final commit goes out in it
	// The line names them all, and those gained apart (new_claims).
	attrs := []any{slog.String("member", memberID), slog.Int("generation", int(gen))}
	attrs = append(attrs, logattr.Partitions("claims", claims))
	if kept > 0 {
		attrs = append(attrs, logattr.Partitions("new_claims", assigned))
	}
	m.log.Info("kafka group session started", attrs...)
	// A topic deleted while the member runs is still assigned from the
	// client's metadata: fail at the new session, so that the pipeline's
	// restart policy decides, rather than consume it forever; the same for
	// a topic the cluster refuses for authorization.
	tctx, cancel := context.WithTimeout(ctx, m.opts.ConnectTimeout)
	err := checkTopics(tctx, cl, m.opts.Topics)
	cancel()
	if errors.Is(err, ErrUnknownTopic) || errors.Is(err, ErrDenied) {
		m.fail(err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		// Draining: nothing more is delivered, so claim nothing and leave
		// the group now, rather than hold these partitions from its other
		// members until Close. The leave only starts here (a callback
		// must not wait for it): franz-go first revokes what the member
		// still claims (revoked: in-flight messages waited for, commits),
		// and Close waits for it to end.
		m.log.Info("kafka group leaving: the pipeline drains", logattr.Partitions("unclaimed", assigned))
		//lint:ignore SA1012 a nil context starts the leave without waiting, as a callback must
		_ = cl.LeaveGroupContext(nil) // returns nil
		return
	}
	for topic, parts := range assigned {
		for _, part := range parts {
			p := m.newPartition(topic, part, gen, memberID)
			m.parts[topicPartition{topic, part}] = p
			p.Open(m.stage)
			m.cm.Add(p.Claim)
			m.cm.Assigned(m.ctx, m.opts.Telemetry, p.Claim)
			go p.run()
		}
	}
}

// adjust is the client's AdjustFetchOffsetsFn: it learns where each new
// claim starts (the group's committed offset, or InitialOffset's), and with
// BeginReset moves every claim to InitialOffset's. With OffsetTimestamp,
// the claims starting at InitialOffset start at the exact offset
// startOffsets resolves (franz-go's own lookup by time can skip a record
// appended during it), looked up until it is found (see lookUpStarts),
// never by franz-go on the group's client.
//
// When every new claim needs that lookup, adjust waits for it: when the
// session (ctx) ends first, or the member drains or its Close stops waiting, or the
// cluster refuses the listing for good (the member then fails), adjust
// returns that error and the claims start nowhere. When some new claims
// start without it (at their committed offset), they do not wait for the
// others' lookup: adjust returns at once, and the claims that need it are
// paused in the client until it succeeds (awaitStarts).
func (m *member) adjust(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	reset := func(o kgo.Offset) (committed int64, atReset bool) {
		committed = -1
		if o != m.reset {
			committed = o.EpochOffset().Offset
		}
		return committed, committed < 0 || m.opts.BeginOffset == BeginReset
	}
	var starts map[topicPartition]int64
	var later []topicPartition // the claims that start once awaitStarts has listed where
	if m.opts.InitialOffset == OffsetTimestamp {
		var tps []topicPartition
		all := 0
		for topic, parts := range offsets {
			for part, o := range parts {
				all++
				if _, atReset := reset(o); atReset {
					tps = append(tps, topicPartition{topic, part})
				}
			}
		}
		switch {
		case len(tps) == 0:
		case len(tps) < all:
			later = tps
		default:
			var err error
			if starts, err = m.lookUpStarts(ctx, tps); err != nil {
				// The session ended (a rebalance, Close), or the
				// cluster refused the listing and the member failed:
				// its claims start nowhere (the next session looks
				// again), and franz-go's own lookup would queue on the
				// member's connections.
				return nil, err
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for topic, parts := range offsets {
		for part, o := range parts {
			committed, atReset := reset(o)
			start := committed
			if atReset {
				if at, ok := starts[topicPartition{topic, part}]; ok {
					parts[part] = kgo.NewOffset().At(at)
					start = at
				} else if len(later) > 0 {
					continue // startLater has placed it
				} else if committed >= 0 {
					parts[part] = m.reset
					start = -1
				}
			}
			if p := m.parts[topicPartition{topic, part}]; p != nil {
				p.Begin(committed, start)
				p.log.Debug("kafka partition claimed", slog.Int64("offset", start), slog.Int64("committed", committed))
			}
		}
	}
	if len(later) > 0 {
		m.startLater(offsets, later)
	}
	return offsets, nil
}

// startLater, called by adjust with m.mu held, sets the claims of tps
// (the new claims without a committed offset) to wait for their start
// offset: each is paused in the client and placed at offset 0 (exact, so
// that franz-go does not look it up itself, and never fetched while
// paused), and awaitStarts looks their start up, moves them there and
// resumes them. A draining member starts no lookup: its claims are being
// let go.
func (m *member) startLater(offsets map[string]map[int32]kgo.Offset, tps []topicPartition) {
	ctx, cancel := context.WithCancel(m.ctx)
	l := &startLookup{tps: tps, cancel: cancel}
	paused := make(map[string][]int32)
	for _, tp := range tps {
		offsets[tp.topic][tp.part] = kgo.NewOffset().At(0)
		paused[tp.topic] = append(paused[tp.topic], tp.part)
		if p := m.parts[tp]; p != nil && !m.closing {
			p.Begin(-1, -1)
			p.startMu.Lock()
			p.lookup, p.held = l, true
			p.startMu.Unlock()
			l.waiting.Add(1)
		}
	}
	m.client().PauseFetchPartitions(paused)
	if l.waiting.Load() == 0 {
		cancel()
		return
	}
	m.wg.Go(func() { m.awaitStarts(ctx, l) })
}

// startLookup is one lookup of start offsets that claims wait for after
// adjust returned (startLater).
type startLookup struct {
	tps     []topicPartition
	waiting atomic.Int32       // the claims still waiting for it
	cancel  context.CancelFunc // ends the lookup, once no claim waits
}

// awaitStarts looks up where the claims waiting for l start (lookUpStarts,
// until ctx ends: the member closes, or no claim waits any more) and
// starts each claim still waiting there.
func (m *member) awaitStarts(ctx context.Context, l *startLookup) {
	defer l.cancel()
	starts, err := m.lookUpStarts(ctx, l.tps)
	if err != nil {
		return // the lookup ended, or the member failed
	}
	m.mu.Lock()
	var ps []*partition
	for _, tp := range l.tps {
		if p := m.parts[tp]; p != nil && !m.closing {
			ps = append(ps, p) // a draining member starts no claim
		}
	}
	m.mu.Unlock()
	for _, p := range ps {
		p.startAt(l, starts[topicPartition{p.Topic, p.Part}])
	}
}

// The waits between a member's attempts to find where its claims start
// (lookUpStarts): the first, then twice as long each time up to the last.
const (
	lookupFirstBackoff = time.Second
	lookupMaxBackoff   = 10 * time.Second
)

// lookUpStarts finds where tps start (lookUpStartsOnce), trying again
// after each attempt that fails or gives up at Options.LookupTimeout,
// lookupFirstBackoff later, then twice as long each time up to
// lookupMaxBackoff, until one succeeds. It returns ctx's error once ctx
// ends, and context.Canceled once the member's client is done with (its
// Close stopped waiting, or the member closed). It logs one WARN line
// when the first attempt fails and one more each time the failed
// attempts double (the 2nd, 4th, 8th, ...), and one INFO line when an
// attempt succeeds after failed ones.
//
// A drain ends it too (the attempt under way and the wait for the next,
// at once, with a DEBUG line): a draining member starts no claim, so
// lookUpStarts returns errDraining, and the claims start nowhere (adjust
// returns it, which ends the session, and the member, closing, leaves the
// group as the next session's claims are assigned).
//
// An attempt the cluster refuses with an error Kafka says not to retry (a
// *kerr.Error whose Retriable is false: an authorization refusal, an
// invalid request, ...) is not tried again, as asking again changes
// nothing until an operator does: the member fails with that error,
// wrapped in ErrDenied or ErrStartRefused (refusedStarts), which
// lookUpStarts returns, so that the pipeline's restart policy decides.
func (m *member) lookUpStarts(parent context.Context, tps []topicPartition) (map[topicPartition]int64, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	defer context.AfterFunc(m.pollCtx, func() { cancel(errDraining) })()
	backoff := lookupFirstBackoff
	for failed := 0; ; {
		if errors.Is(context.Cause(ctx), errDraining) {
			m.log.Debug("kafka start offset lookup stopped", logattr.List("partitions", tps), slog.Any("cause", errDraining))
			return nil, errDraining
		}
		starts, err := m.lookUpStartsOnce(ctx, tps)
		if err == nil {
			if failed > 0 {
				m.log.Info("kafka start offsets listed after failed attempts",
					logattr.List("partitions", tps), slog.Int("failed_attempts", failed))
			}
			return starts, nil
		}
		failed++
		if errors.Is(context.Cause(ctx), errDraining) {
			continue // logged and returned above
		}
		if ctx.Err() == nil && m.hurryCtx.Err() == nil {
			if refusedForGood(err) {
				err = refusedStarts(err)
				m.log.Error("kafka start offsets refused; the member fails",
					logattr.List("partitions", tps), slog.Int("failed_attempts", failed), slog.Any("error", err))
				m.fail(err)
				return nil, err
			}
			if failed&(failed-1) == 0 {
				m.log.Warn("kafka start offsets cannot be listed; trying again on a client of the member's own",
					logattr.List("partitions", tps), slog.Int("failed_attempts", failed),
					slog.Duration("in", backoff), slog.Any("error", claim.Flat(err)))
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if errors.Is(context.Cause(ctx), errDraining) {
				continue // logged and returned above
			}
			return nil, ctx.Err()
		case <-m.hurryCtx.Done():
			t.Stop()
			return nil, m.hurryCtx.Err()
		}
		backoff = min(2*backoff, lookupMaxBackoff)
	}
}

// errDraining is lookUpStarts' error when the member drains.
var errDraining = errors.New("franz: the member drains")

// refusedStarts is the member's error for err, a start offset listing the
// cluster refused for good: ErrDenied for an authorization refusal (see
// denied), ErrStartRefused for any other.
func refusedStarts(err error) error {
	if denied(err) {
		return fmt.Errorf("%w: listing start offsets: %w", ErrDenied, claim.Flat(err))
	}
	return fmt.Errorf("%w: %w", ErrStartRefused, claim.Flat(err))
}

// lookUpStartsOnce runs startOffsets for tps on a client of its own,
// closed when it returns. Kafka answers a connection's requests in order,
// so a listing the cluster leaves unanswered holds only that client's
// connections, not the member's heartbeats, commits and leave, and the
// close cuts it once ctx (the session's) ends or Options.LookupTimeout
// has passed: the error then wraps context.DeadlineExceeded.
func (m *member) lookUpStartsOnce(ctx context.Context, tps []topicPartition) (map[topicPartition]int64, error) {
	cl, err := m.sideClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, m.opts.LookupTimeout)
	defer cancel()
	return startOffsets(ctx, cl, m.opts.StartTime.UnixMilli(), tps)
}

// sideClient returns a client of the cluster with the user's ClientOptions
// and extra, outside the group: its requests go on connections of their
// own. The caller closes it.
func (m *member) sideClient(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append(append([]kgo.Opt(nil), m.opts.ClientOptions...), kgo.SeedBrokers(m.opts.Brokers...),
		kgo.WithContext(m.hurryCtx))
	return kgo.NewClient(append(opts, extra...)...)
}

// commitVersions returns the request versions of cl (kgo.MaxVersions)
// with OffsetCommit at most version 9, which names topics: later versions
// name them by id, which the commit client, outside the group, does not
// track.
func commitVersions(cl *kgo.Client) *kversion.Versions {
	vs := new(kversion.Versions)
	if own, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions); own != nil {
		own.EachMaxKeyVersion(vs.SetMaxKeyVersion)
	} else {
		kversion.Stable().EachMaxKeyVersion(vs.SetMaxKeyVersion)
	}
	if v, ok := vs.LookupMaxKeyVersion(int16(kmsg.OffsetCommit)); ok && v > maxCommitVersion {
		vs.SetMaxKeyVersion(int16(kmsg.OffsetCommit), maxCommitVersion)
	}
	return vs
}

// maxCommitVersion is the last OffsetCommit version that names topics.
const maxCommitVersion = 9

// beforeEndListing, when set, runs in startOffsets before the end offsets
// are listed.
var beforeEndListing func()

// startOffsets resolves where the partitions tps start for the start time
// ms (claim.StartOffsets), with ListOffsets requests through cl, which
// sends each partition's to its leader.
func startOffsets(ctx context.Context, cl *kgo.Client, ms int64, tps []topicPartition) (map[topicPartition]int64, error) {
	level, _ := cl.OptValue(kgo.FetchIsolationLevel).(int8)
	list := func(at int64) claim.Lister[topicPartition] {
		return func(ctx context.Context, tps []topicPartition) (map[topicPartition]int64, error) {
			return listOffsets(ctx, cl, level, at, tps)
		}
	}
	end := func(ctx context.Context, tps []topicPartition) (map[topicPartition]int64, error) {
		if beforeEndListing != nil {
			beforeEndListing()
		}
		return list(-1)(ctx, tps)
	}
	return claim.StartOffsets(ctx, tps, list(ms), end)
}

// listOffsets sends one ListOffsets request for tps at at (a timestamp in
// milliseconds, or -1 for the end offset).
func listOffsets(ctx context.Context, cl *kgo.Client, level int8, at int64, tps []topicPartition) (map[topicPartition]int64, error) {
	resp, err := listOffsetsRequest(level, at, tps).RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	offs := make(map[topicPartition]int64, len(tps))
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %q/%d: %w", t.Topic, p.Partition, err)
			}
			offs[topicPartition{t.Topic, p.Partition}] = listedOffset(&p)
		}
	}
	return offs, nil
}

// listedOffset is the offset a ListOffsets response gives for p: its
// Offset, or with version 0 the first of its OldStyleOffsets.
func listedOffset(p *kmsg.ListOffsetsResponseTopicPartition) int64 {
	if len(p.OldStyleOffsets) > 0 {
		return p.OldStyleOffsets[0]
	}
	return p.Offset
}

// listOffsetsRequest is a ListOffsets request for tps at at.
func listOffsetsRequest(level int8, at int64, tps []topicPartition) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = level
	index := make(map[string]int)
	for _, tp := range tps {
		i, ok := index[tp.topic]
		if !ok {
			i = len(req.Topics)
			index[tp.topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = tp.topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition = tp.part
		p.Timestamp = at
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return req
}

// readableEnd is the end of ftp a reader of the isolation level level
// reads up to: the last stable offset when it reads committed (the
// records of a transaction still open are not readable until it
// commits), the high-water mark otherwise.
func readableEnd(level int8, ftp *kgo.FetchTopicPartition) int64 {
	if level == 1 && ftp.LastStableOffset >= 0 {
		return ftp.LastStableOffset
	}
	return ftp.HighWatermark
}

// revoked is the client's OnPartitionsRevoked: each partition stops, waits
// for its in-flight messages and commits what was handled before the
// rebalance goes on. A revoked partition whose release is already under
// way (Close took it) is waited for too: the client joins the group's next
// generation once revoked returns, and a commit of the generation that
// ends would then be refused (ILLEGAL_GENERATION, then
// REBALANCE_IN_PROGRESS), leaving what was handled uncommitted.
func (m *member) revoked(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
	m.cl.CompareAndSwap(nil, cl)
	ps, underway := m.take(revoked)
	for _, p := range slices.Concat(ps, underway) {
		p.revoking.Store(true) // no later generation for their final commit
	}
	if len(underway) > 0 {
		keys := make([]string, len(underway))
		for i, p := range underway {
			keys[i] = p.Key
		}
		m.log.Debug(revokeWaitsLog, logattr.List("partitions", keys))
		m.moveOn() // their final commit goes out in the revoke's generation
	}
	m.release(ps, true)
	for _, p := range underway {
		<-p.released
	}
}

// revokeWaitsLog is the DEBUG line of a revoke that waits for releases
// already under way.
const revokeWaitsLog = "kafka partitions revoked while their release is under way; the rebalance waits for it"

// lost is the client's OnPartitionsLost: the partitions already belong to
// another member, so they stop at once and commit nothing. The claims of
// them whose release is under way (Close took them) commit nothing more
// either.
func (m *member) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	m.cl.CompareAndSwap(nil, cl)
	m.reach.SessionEnded()
	ps, underway := m.take(lost)
	for _, p := range slices.Concat(ps, underway) {
		p.Lost.Store(true) // before the member joins again: see send
	}
	m.moveOn() // a final commit of the claims under release waits no more
	if len(ps)+len(underway) > 0 {
		m.log.Warn("kafka partitions lost; their in-flight messages will be delivered again", logattr.Partitions("partitions", lost))
	}
	m.release(ps, false)
}

// take removes the claims of tps (all of them when tps is nil) from the
// member's partitions and returns them, for the caller to release; with
// them, the claims of tps whose release is already under way (underway).
func (m *member) take(tps map[string][]int32) (ps, underway []*partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	move := func(k topicPartition, p *partition) {
		ps = append(ps, p)
		delete(m.parts, k)
		m.releasing[k] = p
	}
	if tps == nil {
		for k, p := range m.parts {
			move(k, p)
		}
		return ps, nil
	}
	for topic, parts := range tps {
		for _, part := range parts {
			k := topicPartition{topic, part}
			if p := m.parts[k]; p != nil {
				move(k, p)
			} else if p := m.releasing[k]; p != nil {
				underway = append(underway, p)
			}
		}
	}
	return ps, underway
}

// release stops each partition's reader, withdraws its undispatched
// messages, waits for its in-flight ones (RevokeTimeout, none when it was
// lost) and, when commit is set, commits what was handled.
func (m *member) release(ps []*partition, commit bool) {
	m.mu.Lock()
	resume := !m.closing // the client goes on with its assignment
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			p.stopWaiting(resume)
			p.stop()
			if n := p.Withdraw(); n > 0 {
				p.log.Debug("kafka partition withdrew its undispatched messages", slog.Int("messages", n))
			}
			p.Feed.Close()
			wait := m.opts.RevokeTimeout
			if !commit {
				wait = 0
			}
			p.Release(p.log, wait, m.hurry)
			if commit {
				m.commitFinal(p)
			}
			p.log.Debug("kafka partition released", slog.Int64("committed", p.Committed.Load()))
			m.cm.Remove(p.Claim)
			m.mu.Lock()
			if k := (topicPartition{p.Topic, p.Part}); m.releasing[k] == p {
				delete(m.releasing, k)
			}
			m.mu.Unlock()
			close(p.released)
			m.cm.Revoked(m.ctx, m.opts.Telemetry, p.Claim)
		})
	}
	wg.Wait()
}

// Close stops polling, releases every claim (each waits for its in-flight
// messages and commits), leaves the group and closes the client. It
// returns nil: franz-go's Close reports nothing, and errors while leaving
// the group are logged.
func (m *member) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.Drain()
		<-m.pollDone
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-ctx.Done():
				m.hurryUp()
			case <-done:
			}
		}()
		ps, _ := m.take(nil)
		m.release(ps, true)
		close(m.stopped)
		m.wg.Wait()
		m.client().Close() // leaves the group, after a revoke still running
		m.leaveCutShort()
		// The commits are over: a request given up on still waits on its
		// connection, which this cuts.
		m.commits.Close()
		m.cm.FlushLogs()
		m.cancel()
	})
	return nil
}

// leaveCutShort leaves the group on the commit client when Close's
// context ended (or abort gave the client's leave up) before the client's
// own leave could go out: the client's
// context is Close's, and franz-go's leave also waits for a join in flight
// (one that waits for the other members in a rebalance, after the group
// forgot the member), which the client's closing ended. Without it, the
// group would keep the member until its session timed out, or, joined
// anew, until the rebalance's end, then give it partitions nobody reads.
// A leave the cluster answers takes one round trip; it is given up after
// claim.LeaveGrace. A static member does not leave (nor does franz-go's
// leave it), and the group's answer to a member that had left already
// (UNKNOWN_MEMBER_ID) is no error.
func (m *member) leaveCutShort() {
	if m.hurryCtx.Err() == nil || m.instanceID != nil {
		return
	}
	memberID, _ := m.client().GroupMetadata()
	if memberID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, claim.LeaveGrace)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.opts.GroupID
	req.MemberID = memberID
	leaving := kmsg.NewLeaveGroupRequestMember()
	leaving.MemberID = memberID
	leaving.Reason = kmsg.StringPtr("closing past its deadline")
	req.Members = append(req.Members, leaving)
	resp, err := req.RequestWith(ctx, m.commits)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
		for _, r := range resp.Members {
			err = cmp.Or(err, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if err != nil && !errors.Is(err, kerr.UnknownMemberID) {
		// DEBUG, as the other requests a Close past its deadline fails:
		// Close reports its deadline itself.
		m.log.Debug("kafka group leave failed past the close deadline; the group keeps the member until its session times out",
			slog.String("member", memberID), slog.Any("error", claim.Flat(err)))
		return
	}
	m.log.Debug("kafka group left", slog.String("member", memberID))
}

// commit sends the handled offsets of the member's claims (only p's when
// only is not nil) in one OffsetCommit request, abandoned when ctx ends.
func (m *member) commit(ctx context.Context, only *partition) error {
	var c *claim.Claim
	if only != nil {
		c = only.Claim
	}
	return m.cm.Commit(ctx, c, m.send)
}

// send is the member's claim.Send: one OffsetCommit request with the
// group's current generation and member id (without the offsets of the
// claims lost since they were picked), given up when ctx ends. It
// goes through the member's commit client, not the group's: Kafka answers
// a connection's requests in order, so a commit the cluster leaves
// unanswered would hold the heartbeats behind it, and with them the
// member's part in a rebalance, until the client's request timeout. On the
// commit client's connection, a request given up on still holds the
// member's later commits until it is answered (or fails), so that it
// cannot land after them and move the group's offset back.
func (m *member) send(ctx context.Context, blocks []claim.Block) ([]claim.Block, error) {
	if beforeCommitSend != nil {
		beforeCommitSend(m)
	}
	memberID, gen := m.client().GroupMetadata()
	// The offsets were picked before the generation was read: those of a
	// claim lost meanwhile stay out, as the member may have joined the
	// generation read since, in which the partition can be another
	// member's (lost marks its claims before the member joins again).
	// A claim lost after the read was held in that generation (or in an
	// older one, which the broker refuses).
	n := 0
	for _, b := range blocks {
		if !b.C.Lost.Load() {
			blocks[n] = b
			n++
		}
	}
	if blocks = blocks[:n]; n == 0 {
		return blocks, nil
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = m.opts.GroupID
	req.Generation = gen
	req.MemberID = memberID
	req.InstanceID = m.instanceID
	index := make(map[string]int, 1)
	for _, b := range blocks {
		i, ok := index[b.C.Topic]
		if !ok {
			i = len(req.Topics)
			index[b.C.Topic] = i
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = b.C.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = b.C.Part
		p.Offset = b.Off
		p.LeaderEpoch = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := req.RequestWith(ctx, m.commits)
	if err != nil {
		return blocks, claim.Flat(err)
	}
	got := make(map[topicPartition]error, len(blocks))
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			got[topicPartition{t.Topic, p.Partition}] = kerr.ErrorForCode(p.ErrorCode)
		}
	}
	for i := range blocks {
		b := &blocks[i]
		kerrv, ok := got[topicPartition{b.C.Topic, b.C.Part}]
		switch {
		case !ok:
			b.Err = errNoAnswer
		case kerrv != nil:
			b.Err = kerrv
		}
	}
	return blocks, nil
}

// refusedByRebalance reports whether err is the broker refusing a commit
// because the group rebalances: a commit carries the generation of the
// group's latest JoinGroup answer, refused with REBALANCE_IN_PROGRESS until
// the rebalance completes (or with ILLEGAL_GENERATION when the answer
// came after the commit left); it goes out again in the new generation.
func refusedByRebalance(err error) bool {
	return errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress)
}

// beforeTopicCheck, when set, runs in startMember before the member
// checks that its topics exist, with Run's context.
var beforeTopicCheck func(context.Context)

// beforeCommitSend, when set, runs in send before the request is built.
var beforeCommitSend func(*member)

// errNoAnswer is a commit's error for a partition the broker's answer left
// out.
var errNoAnswer = errors.New("franz: the commit response does not answer for the partition")

// commitFinal commits p's handled offsets on its release, retrying a few
// times unless the group has moved on (the member's generation is over),
// all of it within RevokeTimeout (claim.Member.CommitFinal). A commit the
// group refused as it rebalanced (refusedByRebalance) goes out again, within
// the same RevokeTimeout and until Close's context ends, each time the
// member's session moves on while it still owns p: under a cooperative
// strategy a rebalance revokes nothing the member keeps, so nothing holds
// it for this release, and the member owns p in the generation it syncs
// next. It stops once p is lost (its offsets may be another member's
// now), and after the commit of p's revoke, which waits for this release:
// no later generation comes before it ends. A refusal that goes out again
// is logged below WARN (claim.FinalRefusedLog); one that does not, as the
// wait for the next generation ended or p was lost meanwhile, is logged
// at WARN once, when commitFinal gives it up.
func (m *member) commitFinal(p *partition) {
	ctx, cancel := context.WithTimeout(m.hurryCtx, m.opts.RevokeTimeout)
	defer cancel()
	var refused error // the last refusal that was to go out again
	for {
		moved := m.nextMove()
		last := p.revoking.Load()
		err := m.cm.CommitFinal(ctx, m.opts.RevokeTimeout, p.Claim, 3, 100*time.Millisecond, m.send, func(err error) bool {
			return errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.UnknownMemberID) ||
				errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kgo.ErrClientClosed)
		}, func(err error) bool {
			return refusedByRebalance(err) && !last && !p.Lost.Load()
		}) // recorded and logged
		if !errors.Is(err, claim.ErrSentAgain) {
			if err == nil && refused != nil && p.Marked.Load() != p.Committed.Load() {
				m.cm.GaveUp(refused) // nothing went out: p was lost since
			}
			return // accepted, or failed and warned of
		}
		refused = err
		if p.Marked.Load() == p.Committed.Load() {
			return // p's offset went out: what was refused is another claim's
		}
		select {
		case <-moved:
			if !p.Lost.Load() {
				continue
			}
		case <-ctx.Done():
		}
		m.cm.GaveUp(refused)
		return
	}
}

// nextMove returns a channel closed the next time the member's session
// moves on (moveOn).
func (m *member) nextMove() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.moved
}

// moveOn tells the final commits waiting for it (nextMove) that the
// member's session moved on: the member synced a new generation
// (assigned), the client revokes claims whose release is under way, in
// the generation the member holds them in (revoked), or the member lost
// its partitions (lost).
func (m *member) moveOn() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.moved)
	m.moved = make(chan struct{})
}
