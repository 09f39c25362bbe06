// Package kafka is a Boulevard source that reads Kafka topics through an
// IBM/sarama consumer group.
//
// Every producer stage of the pipeline is one group member; every partition
// the member claims is one flow-controlled feed with the pipeline's permit
// window; every message carries a *Metadata and is acknowledged to its
// partition claim, which commits the contiguous prefix of handled offsets on
// an interval (or as soon as it advances, with CommitOnAck), when the
// partition is released and when the source closes. Stats reports each
// member's claims, committed offsets and lag.
//
// A new claim that starts elsewhere than its committed offset
// (OffsetTimestamp, BeginReset) first looks its start offset up: an
// attempt that fails is tried again within the claim, with backoff, while
// the member stays in its group generation, and so is the move of its
// consumer there; a listing or a move the cluster refuses with an error
// Kafka says not to retry fails Run with ErrDenied or ErrStartRefused,
// a claim's fetch refused for authorization fails it with ErrDenied, a
// fetch answered with another error Kafka says not to retry (but
// UNKNOWN_SERVER_ERROR) with ErrFetchRefused, a fetch that cannot be
// decoded (or that the broker answers with CORRUPT_MESSAGE) with
// ErrCorruptBatch, and, with
// Consumer.Group.ResetInvalidOffsets false, an offset out of its
// partition's range with ErrOffsetOutOfRange, so that the pipeline's
// restart policy decides (see SaramaDefaults, Metadata.Timeout, and
// docs/kafka.md, Replay and Failures).
// See docs/kafka.md for the semantics in full.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/lifecycle"
)

// ErrClosed is returned by Run once the source has been closed.
var ErrClosed = claim.ErrClosed

// ErrConnect is wrapped by the error Run returns when the member cannot
// reach the cluster; the pipeline then restarts the source with backoff.
// The error names every bootstrap broker and why it could not be reached.
var ErrConnect = claim.ErrConnect

// ErrUnknownTopic is wrapped by the error Run returns when a subscribed
// topic does not exist in the cluster; the error names the topics. Run
// returns it at once instead of retrying, so the pipeline's restart policy
// decides how long to wait for the topic.
var ErrUnknownTopic = claim.ErrUnknownTopic

// ErrConsume is wrapped by the error Run returns when joining the group kept
// failing (Options.Config.Consumer.Group.Rebalance.Retry governs sarama's own
// retries, after which the source gives up maxConsumeFailures times in a row).
var ErrConsume = claim.ErrConsume

// ErrGroupProtocol is wrapped by the errors of a join the group's
// coordinator refuses because the group's members offer no partition
// assignment strategy in common with this member's (sarama's
// ErrInconsistentGroupProtocol, which the error also wraps): a group of
// members on sarama's default, range, that a member with
// "cooperative-sticky" joins, or the other way round. The error names the
// group and the member's strategies. The member logs the first refusal
// of a run at WARN (the others at DEBUG) and keeps joining (the other
// members may be leaving, as in a rolling deploy), so Run returns it
// within ErrConsume, after maxConsumeFailures refusals in a row. franz.ErrGroupProtocol is the same error.
var ErrGroupProtocol = claim.ErrGroupProtocol

// ErrDenied is wrapped by the error Run returns, at once, when Kafka refuses
// the credentials or a permission the member needs (on the group, a topic
// or the cluster; sarama.ErrGroupAuthorizationFailed and its kin, which the
// error also wraps), whether to join the group, to list where new
// claims start (OffsetTimestamp, BeginReset), to rewind a partition for
// a redelivery (ErrRewindRefused) or to fetch a claimed partition (the
// error then names it), the metadata or leader lookup each needs
// included: asking again would change nothing until an operator does.
// franz.ErrDenied is the same error.
var ErrDenied = claim.ErrDenied

// ErrStartRefused is wrapped by the error Run returns, at once, when the
// cluster refuses to list where a new claim starts (the ListOffsets
// requests of OffsetTimestamp, or of BeginReset), or to let the claim's
// consumer move there (the ListOffsets requests with which the member's
// consumer checks the start offset against the partition's offset
// range), with an error Kafka says not to retry (a sarama.KError whose
// kerr.Error has Retriable false, which the error also wraps), other than
// an authorization refusal, which is ErrDenied. The error names the
// partition (and, for the move, the offset). franz.ErrStartRefused is
// the same error.
var ErrStartRefused = claim.ErrStartRefused

// ErrRewindRefused is wrapped by the error Run returns, at once, when the
// cluster refuses a redelivery's rewind (FailureRedeliver,
// DispositionRetry: the ListOffsets requests with which the member's
// consumer checks the failed offset against the partition's offset range)
// with an error Kafka says not to retry (a sarama.KError whose kerr.Error
// has Retriable false, which the error also wraps), other than an
// authorization refusal, which is ErrDenied. The error names the partition
// and the offset. The franz-go source never returns it: its rewind moves
// its client's fetch position, which the cluster is not asked to accept.
var ErrRewindRefused = claim.ErrRewindRefused

// ErrFetchRefused is wrapped by the error Run returns, at once, when the
// cluster answers a claimed partition's fetch with an error Kafka says
// not to retry other than an authorization refusal (which is ErrDenied):
// UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD, UNSUPPORTED_VERSION,
// OFFSET_MOVED_TO_TIERED_STORAGE and the other codes whose kerr.Error has
// Retriable false, but for UNKNOWN_SERVER_ERROR, which brokers also send
// for passing faults and which is fetched again, and OFFSET_OUT_OF_RANGE
// (ErrOffsetOutOfRange). The error names the partition and wraps the
// broker's (a sarama.KError). franz.ErrFetchRefused is the same error.
var ErrFetchRefused = claim.ErrFetchRefused

// ErrOffsetOutOfRange is wrapped by the error Run returns, at once, when
// a claimed partition's offset is out of the partition's range (its
// committed offset was deleted by retention, or a fetch position fell out
// of range) and Config.Consumer.Group.ResetInvalidOffsets is false, so
// that sarama is not to move the claim to Consumer.Offsets.Initial: the
// member would otherwise rejoin the group for as long as the offset
// stays out of range. The error names the partition and the offset (when
// known) and wraps sarama.ErrOffsetOutOfRange. The franz-go source never
// returns it (see docs/kafka.md, Failures).
var ErrOffsetOutOfRange = claim.ErrOffsetOutOfRange

// ErrCorruptBatch is wrapped by the error Run returns, at once, when a
// claimed partition's fetch cannot be decoded (a sarama
// PacketDecodingError: a batch whose CRC does not match, a length or a
// compression codec that does not hold) or the broker answers it with
// CORRUPT_MESSAGE (sarama.ErrInvalidMessage): fetching again returns the
// same bytes, and skipping them would lose their records, so the member
// stops there, as Kafka's Java consumer does, and the pipeline's restart
// policy decides. The error names the partition and the offset its claim
// has read to (the batch's, unless records before it still waited in
// sarama's channel), and wraps sarama's error. sarama decodes a broker's whole
// Fetch answer at once, so the partition named is one that answer
// covered (see docs/kafka.md, Failures). An answer larger than
// sarama.MaxResponseSize, which sarama refuses as a length that does not
// hold, fails the member the same way, with a message naming that limit.
// franz.ErrCorruptBatch is the same error.
var ErrCorruptBatch = claim.ErrCorruptBatch

// ErrNotCreated is returned by Run, Validate and Info of a Source that New
// did not make (a zero Source, or a nil *Source): it has no options to
// run with. Its Stats are empty and Close returns nil. franz.ErrNotCreated
// is the same error.
var ErrNotCreated = claim.ErrNotCreated

// ErrNilContext is returned by Run and Close for a nil context, before
// they do anything: Run connects nothing, and Close leaves the source
// open. franz.ErrNilContext is the same error.
var ErrNilContext = claim.ErrNilContext

// maxConsumeFailures is how many failed Consume calls in a row make Run fail.
const maxConsumeFailures = 10

// Source reads Kafka topics through a sarama consumer group. It implements
// producer.Source[[]byte] (the payload is the record value). Create it
// with New.
type Source struct {
	opts Options
	red  redact.Secrets // Config's credentials, taken out of Run's errors and the members' log lines
	live lifecycle.Members[*member]
	made bool // by New
}

var _ producer.Source[[]byte] = (*Source)(nil)

// New validates opts and returns a source. Nothing connects until the
// pipeline runs it. An invalid option is reported as a validate.Errors value
// naming each field and rule, for example "kafka.brokers is required".
func New(opts Options) (*Source, error) {
	o := opts.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Copies: the caller may reuse its slices once New has returned.
	o.Brokers, o.Topics = slices.Clone(o.Brokers), slices.Clone(o.Topics)
	return &Source{opts: o, red: redact.SaramaSecrets(o.Config), made: true}, nil
}

// Options returns the source's options with their defaults applied; its
// Brokers and Topics are copies.
func (s *Source) Options() Options {
	o := s.opts
	o.Brokers, o.Topics = slices.Clone(o.Brokers), slices.Clone(o.Topics)
	return o
}

// Validate checks the options again (New already did). It returns
// ErrNotCreated for a Source New did not make.
func (s *Source) Validate() error {
	if s == nil || !s.made {
		return ErrNotCreated
	}
	return s.opts.Validate()
}

// Info describes the source to the pipeline, which reads it when it is
// created:
//   - Ordered unless Options.Unordered: a partition's messages are handled
//     in offset order by one processor;
//   - Window DefaultWindow (512), the permit window per partition when the
//     pipeline's producer.Options.Flow.Initial is 0, so that sarama's
//     per-partition channel, half the window, keeps sarama's own default
//     size of 256;
//   - the errors of Validate.
func (s *Source) Info() (producer.Info, error) {
	if s == nil || !s.made {
		return producer.Info{Window: DefaultWindow}, ErrNotCreated
	}
	return producer.Info{Ordered: !s.opts.Unordered, Window: DefaultWindow}, s.Validate()
}

// Run joins the consumer group as one member and feeds the stage with the
// records of the partitions it claims, until ctx is cancelled. The member
// then stops fetching but stays in the group, so that the messages it
// delivered can still be acknowledged and committed, until Close, or until
// a rebalance reaches it first: then it commits what was handled and
// leaves the group rather than keep or claim partitions (see Drain).
//
// Run first checks that a bootstrap broker answers (Options.ConnectTimeout)
// and that every topic exists. It returns an error wrapping ErrConnect when
// the cluster cannot be reached, ErrUnknownTopic when a topic does not
// exist, ErrDenied when Kafka refuses the member's credentials or
// permissions (the start offset listing of a new claim, its move to that
// offset, a redelivery's rewind and a claim's fetch included, and the
// metadata or leader lookup each needs), ErrStartRefused or
// ErrRewindRefused when the cluster refuses that listing or move, or that
// rewind, with another error Kafka says not to retry, ErrFetchRefused
// when it answers a claim's fetch with another such error (but for
// UNKNOWN_SERVER_ERROR), ErrOffsetOutOfRange when a claim's offset is out
// of its partition's range and Config.Consumer.Group.ResetInvalidOffsets
// is false, or ErrConsume when joining the group
// keeps failing; the pipeline logs it and restarts the source with
// backoff, as its restart policy says. A listing or a rewind that fails
// otherwise (no answer within Config.Metadata.Timeout, an error Kafka says
// to retry) is tried again within the claim, with backoff, without leaving the group
// (see docs/kafka.md, Replay). It returns ErrClosed after Close,
// ErrNotCreated, at once, when New did not make the source, and
// ErrNilContext, at once, for a nil ctx. No error
// message contains a newline, nor Config's SASL user or password (a
// broker's refusal that quotes them included): they are replaced by
// "[redacted]" there, in the error a degraded stage reports and in the
// lines the source logs.
func (s *Source) Run(ctx context.Context, stage *producer.Stage[[]byte]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s == nil || !s.made {
		return ErrNotCreated
	}
	return s.red.Err(s.live.Run(ctx, func() (*member, error) { return s.startMember(ctx, stage) }))
}

// Close commits what was handled, leaves the group and releases every
// connection of every member. It waits for the partitions' in-flight
// messages at most Options.RevokeTimeout, or until ctx is done, and not at
// all for those a drain the pipeline cut short left without an outcome
// (producer.Stage.Abandoned). When ctx has ended (before Close, or
// while it waits), each member still leaves the group, waiting at most
// 500ms more for the answer before it cuts its connections (sarama's
// retries then fail at once and wait no backoff): a member that
// closed without leaving would keep its partitions from the group until
// its session timed out. The connection check's attempts still running
// (see Options.ConnectTimeout) are waited for, and ended when ctx ends.
// Errors while leaving the group are logged; Close returns an error only when a client's
// connections could not be closed, or when ctx ends while another Close
// called meanwhile still closes the members (every Close waits for that
// closing). On a Source New did not make it does nothing and returns nil.
// A nil ctx returns ErrNilContext and leaves the source as it was, open:
// call Close again with a context.
func (s *Source) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s == nil || !s.made {
		return nil
	}
	return s.live.Close(ctx)
}

// startMember connects a member. It returns nil, nil when ctx ended first.
func (s *Source) startMember(runCtx context.Context, stage *producer.Stage[[]byte]) (*member, error) {
	if s.live.Closed() {
		return nil, ErrClosed
	}
	cfg := s.opts.saramaConfig(stage.Flow().MaxWindow())
	// Each response the member's client reads is an answer from the
	// cluster, which ends a degrade its session outlived (kafkareach.Reach).
	reach := &kafkareach.Reach{Health: stage.Health()}
	cfg.MetricRegistry = kafkareach.NewHeardRegistry(cfg.MetricRegistry, reach.Heard)
	log := slog.New(redact.Handler(lifecycle.Logger(s.opts.Logger, stage).Handler(), s.red)).With(slog.String("group", s.opts.GroupID))
	if err := s.checkBrokers(runCtx, log, cfg); err != nil || runCtx.Err() != nil {
		return nil, err
	}
	conns := kafkaconn.New(cfg)
	conns.Use(cfg)
	// Once Close has cut the connections, sarama's retries (the offset
	// manager's lookup of a new session's committed offsets, the
	// coordinator lookups it and the leave make) fail at once and must
	// not sleep their backoff between attempts.
	conns.SkipBackoffsOnceCut(cfg)
	// sarama's requests take no context: when ctx ends while the client
	// connects or asks for the topics' metadata (each request waits up to
	// Metadata.Timeout for a cluster that does not answer), the
	// connections are cut, so that the client fails at once.
	stop := conns.CutWhenDone(runCtx)
	client, err := sarama.NewClient(s.opts.Brokers, cfg)
	if err != nil {
		err = fmt.Errorf("%w (brokers %s): %w", ErrConnect, quoteAll(s.opts.Brokers), flat(err))
	} else if err = checkTopics(client, s.opts.Topics); err != nil {
		_ = client.Close()
	}
	if !stop() {
		if err == nil {
			_ = client.Close()
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	group, err := sarama.NewConsumerGroupFromClient(s.opts.GroupID, client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("%w: consumer group %q: %w", ErrConnect, s.opts.GroupID, flat(err))
	}
	lookups := &offsetClient{Client: client, ctxs: map[topicPart]*lookup{}}
	consumer, err := sarama.NewConsumerFromClient(lookups)
	if err != nil {
		_ = group.Close()
		_ = client.Close()
		return nil, fmt.Errorf("%w: %w", ErrConnect, flat(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	consumeCtx, endSession := context.WithCancel(ctx)
	hurryCtx, hurryStop := context.WithCancel(context.Background())
	m := &member{
		src:      s,
		opts:     &s.opts,
		stage:    stage,
		log:      log,
		client:   client,
		group:    group,
		consumer: consumer,
		ctx:      ctx,
		cancel:   cancel,

		consumeCtx: consumeCtx,
		endSession: endSession,

		drainCh:   make(chan struct{}),
		hurry:     make(chan struct{}),
		hurryCtx:  hurryCtx,
		hurryStop: hurryStop,
		conns:     conns,
		cutDone:   make(chan struct{}),
		left:      make(chan struct{}),
		failed:    make(chan error, 1),
		down:      make(chan struct{}),
		loopDone:  make(chan struct{}),
		errsSeen:  make(chan chan struct{}),

		commitVersion: commitVersion(cfg.Version),
		commitConn:    newCommitConn(conns, cfg),
		lookups:       lookups,
		reach:         reach,
	}
	lookups.list = m.listOffset
	m.cm = claim.NewMember(s.opts.GroupID, stage.Name(), m.log, s.opts.CommitMode == CommitOnAck)
	m.cm.Rebalancing = refusedByRebalance
	m.cm.RebalanceTimeout = cfg.Consumer.Group.Rebalance.Timeout
	if !s.live.Add(m) {
		cancel()
		hurryStop()
		_ = consumer.Close()
		_ = group.Close()
		_ = client.Close()
		return nil, ErrClosed
	}
	m.wg.Go(m.logErrors)
	m.wg.Go(m.commitLoop)
	m.wg.Go(m.listHighWaters)
	go m.loop()
	return m, nil
}

// member is one consumer-group member: one producer stage's Run.
type member struct {
	src      *Source
	opts     *Options
	stage    *producer.Stage[[]byte]
	log      *slog.Logger
	client   sarama.Client
	group    sarama.ConsumerGroup
	consumer sarama.Consumer // for partitions rewound to redeliver a message
	lookups  *offsetClient   // consumer's client

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	// consumeCtx is the Consume context, a child of ctx. endSession ends
	// it, and with it the session, once a rebalance reaches a draining
	// member (leaveOnRebalance).
	consumeCtx context.Context
	endSession context.CancelFunc
	leaveOnce  sync.Once

	drainOnce sync.Once
	drainCh   chan struct{} // closed when Run's ctx ends: stop delivering
	hurryOnce sync.Once
	hurry     chan struct{}   // closed when Close's ctx ends: stop waiting
	hurryCtx  context.Context // cancelled with hurry: commits give up too
	hurryStop context.CancelFunc
	conns     *kafkaconn.Set // the client's connections, cut when Close's ctx ends
	cutDone   chan struct{}  // closed once cutShort has run
	left      chan struct{}  // closed once Close has left the group
	closeOnce sync.Once
	closeErr  error
	failOnce  sync.Once
	failed    chan error    // receives the error fail reports, once
	down      chan struct{} // closed once fail has run: loop joins no more
	loopDone  chan struct{}
	// errsSeen takes a channel from loop after each session, which
	// logErrors closes once it has handled every error the group had
	// queued by then (seenErrors).
	errsSeen chan chan struct{}
	wg       sync.WaitGroup // logErrors, commitLoop, the listing of end offsets (listHighWaters)

	// The member's claims, session and commit bookkeeping (commit.go: one
	// request in flight at a time, on a connection of its own).
	cm            *claim.Member
	commitVersion int16
	commitConn    *commitConn

	// reach reports the stage degraded while the member cannot read from
	// the cluster, and running again once it reads (kafkareach.Reach). Its
	// client's responses are heard through Config.MetricRegistry
	// (kafkareach.NewHeardRegistry).
	reach *kafkareach.Reach
}

func (m *member) draining() bool {
	select {
	case <-m.drainCh:
		return true
	default:
		return false
	}
}

// Drain stops delivering (Run's ctx ended): the member leaves the group
// at Close, or at the first rebalance that reaches it before. Under an
// eager strategy that rebalance ends the session (loop); under a
// cooperative one the session outlives it, so the member ends it itself
// when the rebalance gives it a partition or takes one from it
// (consumeClaim, leaveOnRebalance).
func (m *member) Drain() { m.drainOnce.Do(func() { close(m.drainCh) }) }

// leaveOnRebalance ends the session of a draining member that a rebalance
// reached without ending its session (a cooperative one): every claim it
// still holds stops, waits for its in-flight messages at most
// RevokeTimeout, commits what was handled and lets go; then Consume
// returns and loop leaves the group, so the group gives the partitions to
// members that deliver them. It does not wait.
func (m *member) leaveOnRebalance(log *slog.Logger, why string) {
	m.leaveOnce.Do(func() {
		log.Info("kafka group leaving: the pipeline drains", slog.String("rebalance", why))
		m.endSession()
	})
}

// fail reports err, which ends the member, to Failed, once: the first
// caller's error is the one Run returns (loop, or a claim whose start
// offset listing or rewind was refused for good), and loop calls Consume no more.
func (m *member) fail(err error) { m.failWith(func() error { return err }) }

// failWith is fail for an error that takes a request to describe (the
// offset an out-of-range claim read from): the member is down at once,
// so that loop does not join the group again while describe waits for
// the broker, and describe's error goes to Failed.
func (m *member) failWith(describe func() error) {
	m.failOnce.Do(func() {
		close(m.down)
		m.failed <- describe()
	})
}

// strategyNames are the names of the partition assignment strategies the
// member offers the group, in its order of preference.
func strategyNames(cfg *sarama.Config) []string {
	ss := cfg.Consumer.Group.Rebalance.GroupStrategies
	if st := cfg.Consumer.Group.Rebalance.Strategy; st != nil {
		ss = []sarama.BalanceStrategy{st}
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name()
	}
	return names
}

// isDown reports whether the member failed.
func (m *member) isDown() bool {
	select {
	case <-m.down:
		return true
	default:
		return false
	}
}

// Failed receives the error that ends the member (maxConsumeFailures
// failed sessions, a topic gone, a refusal for credentials or
// permissions, a fetch's included, a start offset listing, a rewind or a
// fetch refused for good, or an offset out of range not to be reset).
func (m *member) Failed() <-chan error { return m.failed }

// Stats is the member's snapshot.
func (m *member) Stats() claim.MemberStats { return m.cm.Stats() }

// loop calls Consume for each session until the member closes or drains.
func (m *member) loop() {
	defer close(m.loopDone)
	failures := 0
	// refusals picks which joins refused for the group's strategies are
	// logged at WARN: the first of a run, not each of its retries.
	var refusals claim.FailureRun
	for {
		err := m.group.Consume(m.consumeCtx, m.opts.Topics, (*handler)(m))
		m.seenErrors()
		if m.ctx.Err() != nil || m.isDown() || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			// Closed, or a claim failed the member (its session then
			// ended): joining again is for the restart policy to decide.
			return
		}
		if m.draining() {
			// Do not claim new partitions while the pipeline drains: leave
			// the group now, so the rebalance need not wait for this member
			// (the session ended with a rebalance, or leaveOnRebalance
			// ended it).
			if err := m.group.Close(); err != nil {
				m.log.Warn("kafka consumer group left with an error", slog.Any("error", flat(err)))
			}
			return
		}
		if err == nil {
			failures, refusals = 0, claim.FailureRun{}
			continue
		}
		if denied(err) {
			// Joining again changes nothing until an operator does: fail
			// now and let the pipeline's restart policy decide.
			m.fail(fmt.Errorf("%w: %w", ErrDenied, flat(err)))
			return
		}
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			// A topic went away (or never existed): fail now, so that the
			// pipeline's restart policy decides, rather than rejoining
			// forever.
			if terr := checkTopics(m.client, m.opts.Topics); terr != nil {
				m.fail(terr)
				return
			}
		}
		if errors.Is(err, sarama.ErrInconsistentGroupProtocol) {
			err = claim.GroupProtocol(m.opts.GroupID, strategyNames(m.client.Config()), flat(err))
		}
		failures++
		if failures >= maxConsumeFailures {
			m.fail(fmt.Errorf("%w: %w", ErrConsume, flat(err)))
			return
		}
		level := slog.LevelWarn
		if errors.Is(err, ErrGroupProtocol) && !refusals.Log(err, 0) {
			level = slog.LevelDebug
		}
		m.log.Log(context.Background(), level, "kafka consumer group session failed", slog.Any("error", flat(err)), slog.Int("failures", failures))
		m.noteSessionFailed(err)
		t := time.NewTimer(m.client.Config().Consumer.Group.Rebalance.Retry.Backoff)
		select {
		case <-t.C:
		case <-m.ctx.Done():
			t.Stop()
			return
		case <-m.drainCh:
			t.Stop()
			return
		}
	}
}

// noteSessionFailed tells m.reach of a failed session (Consume's err): the
// stage is degraded at the second in a row, or at once when sarama could
// reach no broker.
func (m *member) noteSessionFailed(err error) { m.reach.SaramaSessionFailed(m.src.red.Err(flat(err))) }

// logErrors reads the group's errors until the group closes. A claim's
// fetch (or the metadata or leader lookup it needs) refused with an
// authorization error (denied), or answered with another error Kafka
// says not to retry (fetchRefused), fails the member, with an ERROR line:
// fetching again changes nothing until an operator does. So does a fetch
// that cannot be decoded or that the broker answers with CORRUPT_MESSAGE
// (corruptBatch), with one ERROR line for the member (failCorrupt). So does
// sarama.ErrOffsetOutOfRange for a partition when
// Consumer.Group.ResetInvalidOffsets is false (outOfRange): sarama's
// claim of that partition cannot open (or its consumer stopped), and
// every session would end alike. Any other error
// is logged at WARN, a claim's fetch errors as runs of failures
// (claim.Member.FetchFailed: one line when a run begins, repeats at
// growing intervals, one INFO line when its partitions read again), as
// sarama fetches again after each. sarama forwards a claim's errors to
// the group's channel on a goroutine of its own, and a ConsumerError
// tells nothing of when its fetch was made: an error of a fetch made
// before records the claim then delivered can come after them, and then
// begins a run that the partition's next records end (see
// docs/kafka.md, Logging). Between two sessions it answers loop's
// seenErrors once it has handled every error queued.
func (m *member) logErrors() {
	errs := m.group.Errors()
	for {
		select {
		case err, ok := <-errs:
			if !ok {
				return
			}
			m.handleError(err)
		case seen := <-m.errsSeen:
			for queued := true; queued; {
				select {
				case err, ok := <-errs:
					if !ok {
						close(seen)
						return
					}
					m.handleError(err)
				default:
					queued = false
				}
			}
			close(seen)
		}
	}
}

// seenErrors returns once logErrors has handled every error the group
// queued before the call (or the member closes). A session ends when one
// of its claims fails to open, as on an offset out of range not to be
// reset, and sarama queues the claim's error before Consume returns: loop
// calls seenErrors before deciding to join again, so that an error that
// fails the member is seen first, however busy the machine.
func (m *member) seenErrors() {
	seen := make(chan struct{})
	select {
	case m.errsSeen <- seen:
	case <-m.ctx.Done():
		return
	}
	select {
	case <-seen:
	case <-m.ctx.Done():
	}
}

// handleError is logErrors' handling of err, one of the group's errors.
func (m *member) handleError(err error) {
	ce, ok := err.(*sarama.ConsumerError)
	if ok && ce.Topic != "" && fetchRefused(ce) {
		// The member fails, which says more than a degrade would.
		ferr := refusedFetch(ce.Topic, ce.Partition, ce.Err)
		m.log.Error("kafka partition fetch refused; the member fails", slog.Any("error", ferr))
		m.fail(ferr)
		return
	}
	// sarama tried every broker it knows, for a claim's fetch (its leader
	// lookup) or the session's heartbeat, or an ACL refuses the group:
	// the member cannot read until one answers, or until the permission
	// is granted back.
	m.reach.SaramaError(m.src.red.Err(flat(err)))
	if !ok || ce.Topic == "" {
		m.log.Log(context.Background(), cutLevel(err), "kafka consumer error", slog.Any("error", flat(err)))
		return
	}
	if corruptBatch(ce.Err) {
		m.failCorrupt(ce.Topic, ce.Partition, m.fetchedTo(ce.Topic, ce.Partition), ce.Err)
		return
	}
	if errors.Is(ce.Err, sarama.ErrOffsetOutOfRange) && !m.client.Config().Consumer.Group.ResetInvalidOffsets {
		m.failWith(func() error {
			ferr := m.outOfRange(ce.Topic, ce.Partition, ce.Err)
			m.log.Error("kafka partition offset out of range and not to be reset; the member fails", slog.Any("error", ferr))
			return ferr
		})
		return
	}
	m.cm.FetchFailed(ce.Topic, ce.Partition, flat(ce.Err))
}

// failCorrupt fails the member with ErrCorruptBatch for err, a fetch of
// topic/part from offset at (-1: not known) that cannot be decoded
// (corruptBatch), and logs it at ERROR, once for the member: sarama
// reports the failed fetch again for each partition the answer covered
// and after each of its retries until the member is down.
func (m *member) failCorrupt(topic string, part int32, at int64, err error) {
	m.failWith(func() error {
		ferr := corruptFetch(topic, part, at, err)
		m.log.Error("kafka partition fetch cannot be decoded; the member fails", slog.Any("error", ferr))
		return ferr
	})
}

// outOfRange is the member's error for err, sarama's
// ErrOffsetOutOfRange for topic/part with
// Consumer.Group.ResetInvalidOffsets false: ErrOffsetOutOfRange, naming
// the offset the claim read from (where it has read to, or, when the
// member claims no such partition, as when its claim could not open, the
// group's committed offset), when it is known.
func (m *member) outOfRange(topic string, part int32, err error) error {
	at := m.fetchedTo(topic, part)
	if at < 0 {
		at = m.committedOffset(topic, part)
	}
	if at < 0 {
		return fmt.Errorf("%w: partition %q/%d: %w", ErrOffsetOutOfRange, topic, part, flat(err))
	}
	return fmt.Errorf("%w: partition %q/%d at offset %d: %w", ErrOffsetOutOfRange, topic, part, at, flat(err))
}

// committedOffset asks the group's coordinator for the group's committed
// offset of topic/part: -1 when there is none or the coordinator does not
// tell (an error, logged at DEBUG).
func (m *member) committedOffset(topic string, part int32) int64 {
	coord, err := m.client.Coordinator(m.opts.GroupID)
	if err != nil {
		m.log.Debug("kafka committed offset not fetched", slog.Any("error", flat(err)))
		return -1
	}
	req := sarama.NewOffsetFetchRequest(m.client.Config().Version, m.opts.GroupID, map[string][]int32{topic: {part}})
	resp, err := coord.FetchOffset(req)
	if err != nil {
		m.log.Debug("kafka committed offset not fetched", slog.Any("error", flat(err)))
		return -1
	}
	b := resp.GetBlock(topic, part)
	if b == nil || !errors.Is(b.Err, sarama.ErrNoError) {
		return -1
	}
	return b.Offset
}

// fetchedTo is where the member's claim of topic/part has read to
// (claim.Claim.Next), -1 when it claims no such partition.
func (m *member) fetchedTo(topic string, part int32) int64 {
	for _, c := range m.cm.Claims() {
		if c.Topic == topic && c.Part == part {
			return c.Next.Load()
		}
	}
	return -1
}

// Close ends the member's sessions (each partition waits for its in-flight
// messages, commits and lets go), leaves the group and closes the
// connections. When ctx ends first, the member is cut short (cutShort) and
// Close returns at most claim.LeaveGrace after.
func (m *member) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		stop := context.AfterFunc(ctx, m.cutShort)
		defer func() {
			if !stop() {
				<-m.cutDone
			}
		}()
		m.Drain()
		m.cancel()
		<-m.loopDone
		// Every claim has made its final commit: a commit still
		// unanswered was abandoned, and it ends now; a later one (the
		// commit loop's last) fails instead of connecting again.
		m.commitConn.cut()
		// sarama's Close reports the last error of the group's error
		// channel as well as its own, which are not the caller's concern:
		// they are logged, and what is left for the caller is whether the
		// connections could be closed.
		if err := m.consumer.Close(); err != nil {
			m.log.Log(context.Background(), cutLevel(err), "kafka consumer closed with an error", slog.Any("error", flat(err)))
		}
		if err := m.group.Close(); err != nil {
			m.log.Log(context.Background(), cutLevel(err), "kafka consumer group closed with an error", slog.Any("error", flat(err)))
		}
		close(m.left)
		m.wg.Wait()
		m.commitConn.close()
		m.cm.FlushLogs()
		m.hurryStop()
		if err := m.client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
			m.closeErr = fmt.Errorf("kafka: close client: %w", flat(err))
		}
	})
	return m.closeErr
}

// cutLevel is the level of a line about err: Debug when err is a request
// failed by the member's own cut of its connections (kafkaconn.ErrCut,
// a dial after the cut or a read or write in flight when it came: a Close
// past its deadline, which says so itself), WARN otherwise.
func cutLevel(err error) slog.Level {
	if errors.Is(err, kafkaconn.ErrCut) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// cutShort is Close running out of time: the partitions stop waiting for
// their in-flight messages, commits give up, and once the member has left
// the group, or claim.LeaveGrace later, its connections are cut, which
// fails at once the requests sarama still waits on (a hung commit, the
// leave) and those it would still make. Without that grace, a member
// whose Close starts with an ended context would not leave, and the group
// would keep it, and the partitions it was given, until its session
// times out.
func (m *member) cutShort() {
	defer close(m.cutDone)
	m.hurryOnce.Do(func() { close(m.hurry); m.hurryStop() })
	grace := time.NewTimer(claim.LeaveGrace)
	defer grace.Stop()
	select {
	case <-grace.C:
	case <-m.left:
	}
	m.conns.Cut()
}

// handler is the member's sarama.ConsumerGroupHandler.
type handler member

func (h *handler) Setup(sess sarama.ConsumerGroupSession) error {
	h.cm.NoteSession(sess.MemberID(), sess.GenerationID(), sess.Claims())
	h.reach.SessionStarted()
	h.log.Info("kafka group session started",
		slog.String("member", sess.MemberID()), slog.Int("generation", int(sess.GenerationID())),
		logattr.Partitions("claims", sess.Claims()))
	return nil
}

func (h *handler) Cleanup(sess sarama.ConsumerGroupSession) error {
	h.reach.SessionEnded()
	h.log.Info("kafka group session ended",
		slog.String("member", sess.MemberID()), slog.Int("generation", int(sess.GenerationID())))
	return nil
}

func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	return (*member)(h).consumeClaim(sess, claim)
}
