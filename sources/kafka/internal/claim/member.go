package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/kafkaends"
	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/internal/safehooks"
	"github.com/boulevard-go/boulevard/telemetry"
)

// LeaveGrace is how long a member whose Close ran out of time (its
// context ended, before Close or during it) still waits for its leave from
// the group to be answered: a member that closed without leaving keeps
// its partitions from the rest of the group until its session times out,
// while a leave the cluster answers takes one round trip. It is well under
// the pipeline's CancelGrace, which Close is given after its context
// ends.
const LeaveGrace = 500 * time.Millisecond

// Member is what a consumer-group member keeps whatever its client: its
// claims, its latest session, and its commit bookkeeping. Commits are
// serialised: at most one request is in flight per member, hence per
// partition.
type Member struct {
	Group string
	Stage string
	Log   *slog.Logger
	// Wake is signalled by claims whose handled prefix advanced, with
	// CommitMode CommitOnAck; nil otherwise.
	Wake chan struct{}
	// Rebalancing, when set, reports whether a partition's commit error
	// is the broker refusing the commit because the group rebalances
	// (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS): the offsets of the
	// partitions the member keeps go out with its next commit, in the
	// new generation. Such a refusal of a commit other than a final one
	// (CommitFinal) is logged at INFO the first time after an accepted
	// commit, at DEBUG after, and once more at WARN when refusals have
	// gone on for RebalanceTimeout; it is counted and kept for Stats as
	// any failure. A final commit's refusals are CommitFinal's again to
	// judge: Rebalancing is not read for them.
	Rebalancing func(error) bool
	// RebalanceTimeout is how long the group waits for its members to
	// rejoin: refusals for Rebalancing's reasons lasting longer are no
	// longer those of a rebalance. 0 never warns.
	RebalanceTimeout time.Duration

	mu         sync.Mutex
	claims     map[*Claim]struct{}
	memberID   string
	generation int32 // the latest generation seen, -1 before the first
	rebalances int64 // generations seen
	joined     bool

	commitSem    chan struct{} // held by the commit in flight
	commitBuf    []Block
	commits      atomic.Int64 // OffsetCommit requests answered
	commitErrors atomic.Int64 // commits (or parts of them) that failed
	lastErr      atomic.Pointer[CommitError]

	// The refusals for Rebalancing's reasons since the last accepted
	// commit (guarded by commitSem): when the first was, and whether
	// their lasting RebalanceTimeout was logged.
	refusedSince  time.Time
	refusedWarned bool

	// failLines holds back the lines of failed commits within
	// logburst.Interval of the last one (see failed).
	failLines logburst.Limiter

	// fetches are the runs of failed fetches of the member's partitions
	// (see FetchFailed).
	fetches repeatlog.Fetches[repeatlog.TopicPartition]
	// fetchMu orders the failed fetches counted in fetches with the
	// sessions noted (NoteSession); assigned is the last session's
	// assignment, nil before the first.
	fetchMu  sync.Mutex
	assigned map[repeatlog.TopicPartition]struct{}
}

// NewMember returns a member of group running in stage; onAck says whether
// claims wake the commit loop on every advance (CommitOnAck).
func NewMember(group, stage string, log *slog.Logger, onAck bool) *Member {
	m := &Member{Group: group, Stage: stage, Log: log, claims: make(map[*Claim]struct{}), generation: -1,
		commitSem: make(chan struct{}, 1)}
	m.fetches.Msg, m.fetches.Log = FetchFailedLog, log
	if onAck {
		m.Wake = make(chan struct{}, 1)
	}
	return m
}

// Advanced is a claim's OnAdvance for this member: with CommitOnAck it
// wakes the commit loop.
func (m *Member) Advanced(int64) {
	if m.Wake != nil {
		Signal(m.Wake)
	}
}

// NoteSession records the member's current session, counts a new
// generation, and takes the partitions not in claims, the session's
// assignment by topic, out of their runs of failed fetches: another
// member fetches them now (see FetchFailed). The partitions the member
// keeps stay in theirs.
func (m *Member) NoteSession(memberID string, generation int32, claims map[string][]int32) {
	m.mu.Lock()
	m.noteSession(memberID, generation)
	m.mu.Unlock()
	m.fetchesLeft(claims)
}

func (m *Member) noteSession(memberID string, generation int32) {
	m.memberID, m.joined = memberID, true
	if generation != m.generation {
		m.generation = generation
		m.rebalances++
	}
}

// Add registers a claim (in its session).
func (m *Member) Add(c *Claim) {
	m.mu.Lock()
	m.noteSession(c.MemberID, c.Generation)
	m.claims[c] = struct{}{}
	m.mu.Unlock()
}

// Remove forgets a claim.
func (m *Member) Remove(c *Claim) {
	m.mu.Lock()
	delete(m.claims, c)
	m.mu.Unlock()
}

// Claims returns the member's current claims.
func (m *Member) Claims() []*Claim {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := make([]*Claim, 0, len(m.claims))
	for c := range m.claims {
		cs = append(cs, c)
	}
	return cs
}

// Block is one partition's offset in a commit request, and what the broker
// said of it.
type Block struct {
	C   *Claim
	Off int64
	// Err is the broker's error for this partition, set by the send
	// function; nil when it accepted the offset.
	Err error
}

// Send commits blocks in one request. It returns the blocks it sent (a
// prefix of blocks, reordered as it likes: those it left out wait for the
// next commit) with each Err set, or an error when the request failed as a
// whole. It returns by ctx's end, with an error wrapping ctx's: the request
// is then abandoned, and whatever the broker makes of it is not recorded
// (the offsets it carried count as uncommitted). blocks is not used after
// it returns.
type Send func(ctx context.Context, blocks []Block) (sent []Block, err error)

// Commit sends, in one request, the handled offsets of the member's claims
// that differ from what they last committed (only c's when only is not
// nil), and records what the broker accepted. It returns the failure, if
// any, as a *CommitError (also logged and kept for Stats; see Rebalancing
// for the refusals of a rebalance). It returns by ctx's end, which also
// ends the wait for the commit before it: a commit that gets no answer by
// then is abandoned and fails with an error wrapping ctx's.
func (m *Member) Commit(ctx context.Context, only *Claim, send Send) error {
	return m.commit(ctx, only, send, false, nil)
}

// commit is Commit; final says it is a released claim's (CommitFinal),
// whose refusals are warned of, its offsets having no next commit, unless
// again reports that its caller sends them again (see CommitFinal).
func (m *Member) commit(ctx context.Context, only *Claim, send Send, final bool, again func(error) bool) error {
	select {
	case m.commitSem <- struct{}{}:
	case <-ctx.Done():
		// Only offsets that were to go out make a failure: a commit with
		// nothing new to send fails nothing by not being sent.
		if blocks := m.uncommitted(nil, only, false); len(blocks) > 0 {
			return m.failed(fmt.Errorf("kafka: commit not sent, the one before is still on its way: %w", context.Cause(ctx)), blocks)
		}
		return nil
	}
	defer func() { <-m.commitSem }()
	blocks := m.uncommitted(m.commitBuf[:0], only, final)
	defer func() {
		all := blocks[:cap(blocks)] // also the blocks the send left out
		clear(all)
		m.commitBuf = all[:0]
	}()
	if len(blocks) == 0 {
		return nil
	}
	sent, err := send(ctx, blocks)
	if err != nil {
		return m.failed(err, sent)
	}
	if len(sent) == 0 {
		return nil // nothing went out
	}
	// Counted before the offsets are recorded, so that whoever sees a
	// committed offset in Stats also sees the commit that made it.
	m.commits.Add(1)
	var failed []Block
	var ferr error
	rebalancing := !final && m.Rebalancing != nil
	sentAgain := final && again != nil
	for _, b := range sent {
		if b.Err == nil {
			b.C.Committed.Store(b.Off)
			continue
		}
		failed = append(failed, b)
		ferr = b.Err
		rebalancing = rebalancing && m.Rebalancing(b.Err)
		sentAgain = sentAgain && again(b.Err)
	}
	switch {
	case len(failed) == 0:
		m.refusedSince, m.refusedWarned = time.Time{}, false
		return nil
	case rebalancing:
		return m.refused(ferr, failed, false)
	case sentAgain:
		return fmt.Errorf("%w: %w", ErrSentAgain, m.refused(ferr, failed, true))
	}
	return m.failed(ferr, failed)
}

// uncommitted appends to blocks, and returns, the handled offsets of the
// member's claims (only only's when it is not nil and others is not set)
// that differ from what they last committed, but for lost claims. With
// others, only's offset comes first, then the other claims' (none when
// only has nothing to send): a claim's final commit carries those of the
// claims released with it, so that a member letting go of many partitions
// at once commits them in one request rather than one round trip each, one
// after the other, and the claims whose offsets it carried cost one check
// each.
func (m *Member) uncommitted(blocks []Block, only *Claim, others bool) []Block {
	add := func(c *Claim) bool {
		if off := c.Marked.Load(); off >= 0 && off != c.Committed.Load() && !c.Lost.Load() {
			blocks = append(blocks, Block{C: c, Off: off})
			return true
		}
		return false
	}
	if only != nil {
		if !add(only) || !others {
			return blocks
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.claims {
		if c != only {
			add(c)
		}
	}
	return blocks
}

// CommitFinal commits c's handled offsets on its release, with those of
// the member's other claims in the same request (c's first): the claims
// released at the same time, each waiting for the commit before its own,
// find their offsets committed by it and send nothing. Up to attempts
// requests, pause apart, until one is accepted or fails with an error over
// reports as final (the group has moved on to a new generation, the client
// is closed). The whole of it, the wait for a commit already on its way
// included, ends with ctx and after timeout (the source's RevokeTimeout),
// so that a cluster that does not answer holds the release, and with it
// the rebalance, no longer: a request still unanswered then is abandoned
// and not recorded as done (see Send). It returns the last failure.
//
// again, when not nil, reports whether the caller sends the commit again
// in the group's next generation when the group refused it with that
// error as it rebalanced. A commit again reports so for every partition
// that failed is not a loss yet: it is recorded for Stats and logged as
// a refusal of the rebalance, at INFO the first time after an accepted
// commit and at DEBUG after, never at WARN, and CommitFinal returns at once
// with an error wrapping ErrSentAgain and the *CommitError. A caller that
// then does not send it again after all (its wait for the next generation
// ended) logs it with GaveUp. Any other failure is logged at WARN.
func (m *Member) CommitFinal(ctx context.Context, timeout time.Duration, c *Claim, attempts int, pause time.Duration,
	send Send, over, again func(error) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	for i := range attempts {
		if i > 0 && pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return err
			}
		}
		err = m.commit(ctx, c, send, true, again)
		if err == nil || over(err) || errors.Is(err, ErrSentAgain) || ctx.Err() != nil {
			return err
		}
		if c.Marked.Load() == c.Committed.Load() {
			// c's offset went out: what failed is another claim's,
			// which its own release or the next commit sends again.
			return nil
		}
	}
	return err
}

// failed records and logs a commit the broker did not accept (or that
// could not be sent), and returns the error.
// A burst of them (a cluster gone: every partition's release and the
// periodic commit fail within milliseconds) is one line, then the next
// line within logburst.Interval counts those held back (held_back), and
// FlushLogs logs the count left as the member closes.
func (m *Member) failed(err error, blocks []Block) *CommitError {
	ce := m.record(err, blocks)
	m.logFailed(ce)
	return ce
}

// logFailed logs the WARN line of the failed commit ce (see failed).
func (m *Member) logFailed(ce *CommitError) {
	m.failLines.Log(context.Background(), m.Log, slog.LevelWarn, commitFailedLog,
		logattr.List("partitions", ce.Partitions), slog.Any("error", ce.Err))
}

// commitFailedLog is the WARN line of a commit the broker did not accept:
// a running partition's offsets go out with its next commit; a released
// partition's final commit has none, and the partition's next owner
// handles the records after its committed offset again.
const commitFailedLog = "kafka commit failed; the offsets go out with the next commit, or, for a partition let go, its next owner handles those records again"

// FlushLogs logs the count of failed commits held back since the last
// line about them, if any, and ends the runs of failed fetches going on,
// each with its INFO line (see FetchFailed): the member's owner calls it
// once its commits and fetches are over.
func (m *Member) FlushLogs() {
	m.failLines.Flush(context.Background(), m.Log, slog.LevelWarn, commitFailedLog+logburst.HeldBackSuffix)
	m.endFetchRuns()
}

// ErrSentAgain marks the failure CommitFinal returns for a final commit
// the group refused as it rebalanced and that its caller sends again in
// the group's next generation (CommitFinal's again): it was logged below
// WARN, as no loss.
var ErrSentAgain = errors.New("kafka: the final commit goes out again in the group's next generation")

// FinalRefusedLog is the line of a final commit the group refused as it
// rebalanced and that goes out again in its next generation (CommitFinal's
// again).
const FinalRefusedLog = "kafka final commit refused while the group rebalances; it goes out again in the group's next generation"

// GaveUp logs at WARN, as any failed commit, the final commit behind err
// (a failure of CommitFinal wrapping ErrSentAgain) that its caller does
// not send again after all: its offsets stay uncommitted, and the
// partition's next owner handles those records again. It was recorded for
// Stats already. It logs nothing for any other err.
func (m *Member) GaveUp(err error) {
	var ce *CommitError
	if errors.Is(err, ErrSentAgain) && errors.As(err, &ce) {
		m.logFailed(ce)
	}
}

// refused records and logs a commit the broker refused because the group
// rebalances (see Rebalancing), or a final one that goes out again in the
// group's next generation (final, see CommitFinal), and returns the error.
// A final commit's refusal never warns: the time its refusals may last is
// the caller's to bound. The caller holds commitSem.
func (m *Member) refused(err error, blocks []Block, final bool) *CommitError {
	ce := m.record(err, blocks)
	level, msg := slog.LevelDebug, "kafka commit refused while the group rebalances; the offsets go out with the next commit"
	if final {
		msg = FinalRefusedLog
	}
	switch {
	case m.refusedSince.IsZero():
		m.refusedSince, level = ce.At, slog.LevelInfo
	case final: // DEBUG: how long its refusals may last is the caller's to bound
	case !m.refusedWarned && m.RebalanceTimeout > 0 && ce.At.Sub(m.refusedSince) >= m.RebalanceTimeout:
		m.refusedWarned, level = true, slog.LevelWarn
		msg = "kafka commits refused for longer than the group's rebalance timeout; the offsets go out with the next commit"
	}
	m.Log.Log(context.Background(), level, msg, logattr.List("partitions", ce.Partitions), slog.Any("error", ce.Err),
		slog.Duration("refused_for", ce.At.Sub(m.refusedSince)))
	return ce
}

// record keeps and counts a commit's failure for Stats, its partitions
// ordered by topic and partition (so that a log line naming the first
// few of them names the lowest).
func (m *Member) record(err error, blocks []Block) *CommitError {
	cs := make([]*Claim, len(blocks))
	for i, b := range blocks {
		cs[i] = b.C
	}
	slices.SortFunc(cs, func(a, b *Claim) int { return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Part, b.Part)) })
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Key
	}
	ce := &CommitError{Err: err, At: time.Now(), Partitions: parts}
	m.lastErr.Store(ce)
	m.commitErrors.Add(1)
	return ce
}

// CommitLoop commits on the interval, and on every advance with
// CommitOnAck, until done is closed (each claim commits on its release
// itself).
func (m *Member) CommitLoop(interval time.Duration, done <-chan struct{}, commit func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.Wake:
		case <-done:
			return
		}
		commit()
	}
}

// ListHighWaters lists the end offsets (the high-water marks) of the
// partitions of claims, all of one member, within ctx, and notes each it
// learns (Claim.NoteHighWater). Its failures are its own to log, at DEBUG
// at most: the next listing tries again. Called with no claims (the
// member claims none), it lists nothing, and lets go of what it holds
// for the listings (their connections) until the member claims some.
type ListHighWaters func(ctx context.Context, claims []*Claim)

// HighWaterLoop lists the end offsets of the member's claimed partitions
// with list every interval until ctx ends, each listing given up after
// kafkaends.Timeout, as the Kafka topic and topology backends' are. The client stops fetching a partition whose records
// wait to be delivered, so the high-water mark of its last fetch misses
// what was produced since, and so does the lag counted from it: the
// listed end offsets keep the lag growing while the handlers are slow or
// stuck. While the member claims nothing, list is called with no claims
// every interval. It returns once the listing under way has.
func (m *Member) HighWaterLoop(ctx context.Context, interval time.Duration, list ListHighWaters) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		lctx, cancel := context.WithTimeout(ctx, kafkaends.Timeout)
		list(lctx, m.Claims())
		cancel()
	}
}

// Stats returns the member's figures.
func (m *Member) Stats() MemberStats {
	ms := MemberStats{Stage: m.Stage, GenerationID: -1}
	m.mu.Lock()
	if m.joined {
		ms.MemberID, ms.GenerationID = m.memberID, m.generation
	}
	ms.Rebalances = m.rebalances
	cs := make([]*Claim, 0, len(m.claims))
	for c := range m.claims {
		cs = append(cs, c)
	}
	m.mu.Unlock()
	ms.Partitions = make([]PartitionStats, 0, len(cs))
	for _, c := range cs {
		ms.Partitions = append(ms.Partitions, c.Stats())
	}
	slices.SortFunc(ms.Partitions, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	// The counters after the partitions' offsets: a committed offset in
	// this snapshot comes with the commit that recorded it.
	ms.Commits = m.commits.Load()
	ms.CommitErrors = m.commitErrors.Load()
	ms.LastCommitError = m.lastErr.Load()
	return ms
}

// SourceStats assembles a source's Stats from its members' figures.
func SourceStats(group string, members []MemberStats) Stats {
	slices.SortFunc(members, func(a, b MemberStats) int { return cmp.Compare(a.Stage, b.Stage) })
	return Stats{GroupID: group, Members: members}
}

// Assigned calls h's PartitionAssigned, if any, for a partition the member
// has just claimed. The hook runs on a goroutine of its own (the caller is
// the client's: a sarama session's, franz-go's group manager): a panic in
// it, or an exit (runtime.Goexit), is logged once to m.Log and the claim
// goes on.
func (m *Member) Assigned(ctx context.Context, h *telemetry.Hooks, c *Claim) {
	if h != nil && h.PartitionAssigned != nil {
		safehooks.CallAside(ctx, m.Log, "PartitionAssigned", h.PartitionAssigned, m.assignment(c),
			slog.String("topic", c.Topic), slog.Int("partition", int(c.Part)))
	}
}

// Revoked calls h's PartitionRevoked, if any, for a partition the member
// has let go. The member's context may be over (the source is closing), so
// the hook gets a context of its own. As in Assigned, the hook runs on a
// goroutine of its own: a panic in it, or an exit (runtime.Goexit), is
// logged once to m.Log and the release goes on.
func (m *Member) Revoked(ctx context.Context, h *telemetry.Hooks, c *Claim) {
	if h != nil && h.PartitionRevoked != nil {
		safehooks.CallAside(context.WithoutCancel(ctx), m.Log, "PartitionRevoked", h.PartitionRevoked, m.assignment(c),
			slog.String("topic", c.Topic), slog.Int("partition", int(c.Part)))
	}
}

func (m *Member) assignment(c *Claim) telemetry.Assignment {
	return telemetry.Assignment{Group: m.Group, Member: c.MemberID, Generation: c.Generation, Topic: c.Topic, Partition: c.Part}
}
