package claim

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// discard is the logger of a claim whose Config.Log is nil.
var discard = slog.New(slog.DiscardHandler)

// Config describes a new claim.
type Config struct {
	Topic      string
	Partition  int32
	Generation int32
	MemberID   string
	Group      string // the consumer group, for the records' Metadata
	// Session is the client's session the claim belongs to (compared, never
	// used, by the code that commits).
	Session any
	// Policy is the source's failure policy.
	Policy FailurePolicy
	// Window is the pipeline's permit window per partition: the free list
	// of slots is bounded by maxFreeSlots windows.
	Window int
	// Committed is the group's committed offset, -1 when there is none.
	Committed int64
	// Start is where the claim starts reading; -1 when unknown (the oldest
	// or newest record).
	Start int64
	// Log receives the claim's logs. Nil discards them.
	Log *slog.Logger
	// OnAdvance, when set, is called (under the claim's lock) with the new
	// end of the handled prefix each time it advances.
	OnAdvance func(next int64)
	// HighWater, when set, reads the partition's end from the client's
	// fetches for Stats (which also takes the end offset NoteHighWater was
	// last given, when higher): the latest fetch's high-water mark, or for
	// a reader of committed records the end it reads up to.
	HighWater func() int64
}

// Claim is one claim of one partition within one group generation: its
// feed, its permits, its handled prefix and its acknowledger. A later
// claim of the same partition (another generation, or the same one after a
// cooperative revoke and re-assign) is a new Claim, so acks of an older
// claim can never move a newer claim's offset. Its methods are safe for
// concurrent use, except Deliver and Withdraw, which the claim's reader
// calls.
type Claim struct {
	Topic      string
	Part       int32
	Key        string // partition key and feed name: one string per claim
	Generation int32
	MemberID   string
	Group      string
	Session    any
	Feed       *producer.Feed[[]byte]

	policy FailurePolicy
	log    *slog.Logger
	// abandoned is the stage's Abandoned: closed once the pipeline cut
	// its drain short, after which in-flight messages get no outcome.
	abandoned <-chan struct{}
	onAdvance func(int64)
	highWater func() int64
	// listedHW is the end offset the member listed last for the
	// partition (NoteHighWater), 0 before the first.
	listedHW atomic.Int64

	permits atomic.Int64 // granted and not yet used
	// GrantCh is signalled by grants.
	GrantCh chan struct{}
	// RetryCh is signalled when a failed message is to be redelivered.
	RetryCh chan struct{}

	// For commits and Stats.
	Marked    atomic.Int64 // end of the handled prefix: the offset to commit
	Committed atomic.Int64 // the offset the broker last accepted, -1 when none
	Next      atomic.Int64 // the offset after the last record taken from the client
	ReadAhead atomic.Int32 // records taken from the client, not yet delivered
	// start is the offset the claim started at: where it was told to
	// start, or the first record it took when it was not told (-1 until
	// then). Lag counts from it while the group has no committed offset.
	start atomic.Int64
	// CommittedPast counts the failed messages with DispositionDefault
	// that FailureCommit committed past: they are not delivered again.
	// Each is counted once the offset the claim marks for commit passes
	// it (failedAhead holds them until then).
	CommittedPast atomic.Int64
	// Lost is set when the member lost the partition (its session ended
	// without a revoke): the partition may be another member's already,
	// so the claim's offsets are committed no more.
	Lost atomic.Bool

	mu       sync.Mutex
	cp       *acker.Checkpoint
	free     []*slot // slots whose messages were acknowledged, for reuse
	maxFree  int     // bound of free
	released bool
	refused  bool  // a delivery was refused by the closed feed: Skip does nothing
	retryAt  int64 // lowest offset to redeliver, -1 when none
	// rewindAt is the offset of the claim's last rewind (-1 before the
	// first), and rewinds how many rewinds in a row went to it; only the
	// reader uses them (LogRewind).
	rewindAt int64
	rewinds  int
	holdAt   int64 // lowest offset interrupted by the shutdown, -1 when none: never committed past
	// failedAhead are the offsets of failed messages with
	// DispositionDefault that FailureCommit settled and the offset marked
	// for commit has not passed yet (a lower one is still pending, or
	// held): counted in CommittedPast once it does, dropped if they are to
	// be fetched again first. Guarded by mu.
	failedAhead []uint64
	settled     chan struct{}

	// The reader's scratch space (Deliver, Withdraw).
	msgs  []*message.Message[[]byte]
	slots []*slot
}

// New returns a claim as cfg says. Its feed is opened with Open.
func New(cfg Config) *Claim {
	c := &Claim{
		Topic:      cfg.Topic,
		Part:       cfg.Partition,
		Key:        cfg.Topic + "/" + itoa(cfg.Partition),
		Generation: cfg.Generation,
		MemberID:   cfg.MemberID,
		Group:      cfg.Group,
		Session:    cfg.Session,
		policy:     cfg.Policy,
		log:        cmp.Or(cfg.Log, discard),
		onAdvance:  cfg.OnAdvance,
		highWater:  cfg.HighWater,
		GrantCh:    make(chan struct{}, 1),
		RetryCh:    make(chan struct{}, 1),
		maxFree:    maxFreeSlots * cfg.Window,
		retryAt:    -1,
		rewindAt:   -1,
		holdAt:     -1,
		settled:    make(chan struct{}, 1),
	}
	committed := max(cfg.Committed, -1)
	c.Committed.Store(committed)
	c.Marked.Store(committed)
	c.Next.Store(max(cfg.Start, -1))
	c.start.Store(max(cfg.Start, kafkaoffset.StartOldest)) // sarama's OffsetOldest kept: counted from 0
	c.cp = acker.NewCheckpoint(uint64(max(cfg.Start, 0)))
	return c
}

func itoa(n int32) string {
	var b [12]byte
	i := len(b)
	u := int64(n)
	neg := u < 0
	if neg {
		u = -u
	}
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Open creates the claim's feed in stage.
func (c *Claim) Open(stage *producer.Stage[[]byte]) {
	c.Feed = stage.NewFeed(c.Key, c.Grant)
	c.abandoned = stage.Abandoned()
}

// Grant adds n permits and wakes the reader.
func (c *Claim) Grant(n int) {
	c.permits.Add(int64(n))
	Signal(c.GrantCh)
}

// Take takes up to n of the claim's permits and reports how many.
func (c *Claim) Take(n int) int {
	k := min(int64(n), c.permits.Load())
	if k <= 0 {
		return 0
	}
	c.permits.Add(-k)
	return int(k)
}

// Permits reports the permits granted and not yet used.
func (c *Claim) Permits() int64 { return c.permits.Load() }

// Signal wakes whoever waits on ch, without blocking.
func Signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Redeliver reports whether a failed message with disposition d is fetched
// again (true) or committed past (false): Retry and Discard decide alone,
// DispositionDefault follows policy.
func Redeliver(policy FailurePolicy, d acker.Disposition) bool {
	switch d {
	case acker.DispositionRetry:
		return true
	case acker.DispositionDiscard:
		return false
	}
	return policy == FailureRedeliver
}

// Ack records the outcomes of the claim's messages and marks the contiguous
// handled prefix for the next commit. It ignores outcomes that arrive after
// the claim was released.
//
// A failure the pipeline's shutdown caused (acker.Interrupted) holds the
// claim's commit below its offset for good, whatever its disposition or the
// failure policy: the record was not handled, so it is left for the next
// owner. The claim does not rewind for it (the pipeline is stopping), and
// it stops waiting for the records after it (they are delivered again
// anyway), so that the release is not held up by them.
func (c *Claim) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	advanced := false
	for i := range successful {
		if c.cp.Done(successful[i].ID) {
			advanced = true
		}
		c.recycle(successful[i].Data)
	}
	discarded, redeliver, interrupted := 0, 0, 0
	// The commit is held below the first interrupted offset first, so
	// that a failure after it in the same call is not counted as committed
	// past: it is delivered again.
	for i := range failed {
		if o := &failed[i]; acker.Interrupted(*o) {
			interrupted++
			if c.holdAt < 0 || int64(o.ID) < c.holdAt {
				c.holdAt = int64(o.ID)
			}
		}
	}
	for i := range failed {
		o := &failed[i]
		c.recycle(o.Data)
		if acker.Interrupted(*o) {
			continue
		}
		if Redeliver(c.policy, o.Disposition) {
			if c.cp.IsPending(o.ID) {
				redeliver++
				if c.retryAt < 0 || int64(o.ID) < c.retryAt {
					c.retryAt = int64(o.ID)
				}
			}
			continue
		}
		discarded++
		if o.Disposition == acker.DispositionDefault && c.cp.IsPending(o.ID) && (c.holdAt < 0 || int64(o.ID) < c.holdAt) {
			c.failedAhead = append(c.failedAhead, o.ID)
		}
		if c.cp.Done(o.ID) {
			advanced = true
		}
	}
	if interrupted > 0 {
		// Forget the tracked offsets from the held one on: the claim no
		// longer waits for them, and their acks cannot move the commit.
		c.cp.Truncate(uint64(c.holdAt))
		c.dropFailedFrom(uint64(c.holdAt))
	}
	if len(failed) > 0 && c.log.Enabled(ctx, slog.LevelDebug) {
		// The stage that failed the messages logged each of them; this
		// line only says what the claim does with them.
		c.log.LogAttrs(ctx, slog.LevelDebug, "kafka messages failed",
			slog.String("partition", c.Key), slog.Int("committed_past", discarded), slog.Int("to_redeliver", redeliver),
			slog.Int("interrupted", interrupted))
	}
	if redeliver > 0 {
		Signal(c.RetryCh)
	}
	if advanced {
		c.advanced()
	}
	if c.cp.Pending() == 0 {
		Signal(c.settled)
	}
}

// advanced marks the handled prefix, which moved, for the next commit.
// The caller holds c.mu.
func (c *Claim) advanced() {
	next := c.committable()
	if len(c.failedAhead) > 0 {
		c.countFailedBelow(uint64(next))
	}
	c.Marked.Store(next)
	if c.onAdvance != nil {
		c.onAdvance(next)
	}
}

// countFailedBelow counts in CommittedPast the failed messages of
// failedAhead below next, the offset now marked for commit, and keeps the
// others. The caller holds c.mu.
func (c *Claim) countFailedBelow(next uint64) {
	kept := c.failedAhead[:0]
	for _, o := range c.failedAhead {
		if o >= next {
			kept = append(kept, o)
		}
	}
	if n := len(c.failedAhead) - len(kept); n > 0 {
		c.CommittedPast.Add(int64(n))
	}
	c.failedAhead = kept
}

// dropFailedFrom forgets the failed messages of failedAhead from offset
// from on: they are fetched again (a rewind, a withdrawal) or left to the
// next owner (an interruption holds the commit below them). The caller
// holds c.mu.
func (c *Claim) dropFailedFrom(from uint64) {
	kept := c.failedAhead[:0]
	for _, o := range c.failedAhead {
		if o < from {
			kept = append(kept, o)
		}
	}
	c.failedAhead = kept
}

// Committable is the offset the claim may commit: the end of the handled
// prefix, never past an offset the shutdown interrupted.
func (c *Claim) Committable() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committable()
}

// committable is Committable; the caller holds c.mu.
func (c *Claim) committable() int64 {
	next := int64(c.cp.Next())
	if c.holdAt >= 0 && next > c.holdAt {
		return c.holdAt
	}
	return next
}

// Pending reports how many delivered records wait for their outcome (or
// behind one that does).
func (c *Claim) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cp.Pending()
}

// TakeRetry returns the lowest offset to redeliver and forgets it (the
// tracked offsets from it on are dropped: they are fetched again), or -1
// when there is none.
func (c *Claim) TakeRetry() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.retryAt
	c.retryAt = -1
	if at >= 0 {
		c.cp.Truncate(uint64(at))
		c.dropFailedFrom(uint64(at))
	}
	return at
}

// RewindLogEvery is how many rewinds in a row to one offset, past the
// first few, LogRewind lets pass between two lines.
const RewindLogEvery = 256

// LogRewind logs, at INFO, that the partition rewinds to offset at to
// redeliver a failed message after backoff, with how many rewinds in a row
// went to that offset (rewinds). A message that keeps failing rewinds its
// partition once every backoff, for as long as it fails; so that it makes
// a few lines rather than one per backoff, the rewinds to one offset are
// logged at the 1st, 2nd, 4th, 8th, … up to RewindLogEvery, then at every
// RewindLogEvery-th. Only the claim's reader calls it.
func (c *Claim) LogRewind(log *slog.Logger, at int64, backoff time.Duration) {
	if at != c.rewindAt {
		c.rewindAt, c.rewinds = at, 0
	}
	c.rewinds++
	if n := c.rewinds; n&(n-1) != 0 && n%RewindLogEvery != 0 {
		return
	}
	log.Info("kafka partition rewinds to redeliver a failed message",
		slog.Int64("offset", at), slog.Int("rewinds", c.rewinds), slog.Duration("backoff", backoff))
}

// RetryAt returns the lowest offset to redeliver, -1 when none.
func (c *Claim) RetryAt() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retryAt
}

// Withdraw takes the claim's messages that are still in the stage buffer
// back out, forgets their offsets (the claim no longer waits for them, and
// they are fetched again: by the next owner, or by the claim after a
// rewind) and returns their permits to the claim. It reports how many it
// withdrew.
func (c *Claim) Withdraw() int {
	w := c.Feed.WithdrawAppend(c.msgs[:0])
	n := len(w)
	c.forget(w)
	c.msgs = w[:0]
	return n
}

// forget drops msgs, messages of the claim that will get no outcome
// (withdrawn, or refused by a closed feed): their slots go back, their
// offsets are no longer waited for (they are fetched again: by the next
// owner, or by the claim after a rewind) and their permits return to the
// claim. It clears msgs.
func (c *Claim) forget(msgs []*message.Message[[]byte]) {
	if len(msgs) == 0 {
		return
	}
	_, low, _ := msgs[0].Acknowledger()
	for _, m := range msgs[1:] {
		if _, id, _ := m.Acknowledger(); id < low {
			low = id
		}
	}
	c.mu.Lock()
	for _, m := range msgs {
		_, _, data := m.Acknowledger()
		c.recycle(data)
	}
	clear(msgs)
	c.cp.Truncate(low)
	c.dropFailedFrom(low)
	if c.cp.Pending() == 0 {
		Signal(c.settled)
	}
	c.mu.Unlock()
	c.permits.Add(int64(len(msgs)))
}

// AbandonedLog is the INFO line of a partition released, after the
// pipeline cut its drain short, with messages the pipeline left unhandled.
const AbandonedLog = "kafka partition released with messages the pipeline's cut-short drain left unhandled; they will be delivered again"

// Release waits, at most timeout (or until hurry is closed, or the
// pipeline abandoned its in-flight messages: producer.Stage.Abandoned), for
// the claim's in-flight messages, then stops accepting acks. The caller
// then commits what was handled. While it waits, the pipeline's batchers
// emit their batches without waiting for BatchTimeout
// (producer.Feed.FlushInFlight), so that messages in open batches are
// handled within timeout.
func (c *Claim) Release(log *slog.Logger, timeout time.Duration, hurry <-chan struct{}) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	inFlight := c.Pending()
	log.Debug("kafka partition releasing", slog.Int("in_flight", inFlight))
	if inFlight > 0 && timeout > 0 && c.Feed != nil {
		defer c.Feed.FlushInFlight()()
	}
	for {
		pending := c.Pending()
		if pending == 0 {
			break
		}
		abandoned := false
		select {
		case <-c.settled:
			continue
		case <-c.abandoned:
			abandoned = true
		case <-t.C:
		case <-hurry:
		}
		if abandoned {
			// Expected after a cut-short drain, which logged its own
			// warning.
			log.Info(AbandonedLog, slog.Int("pending", pending))
		} else {
			log.Warn("kafka partition released with messages still in flight; they will be delivered again",
				slog.Int("pending", pending))
		}
		break
	}
	// Acks marked every advance of the handled prefix already; the claim
	// stops taking them.
	c.mu.Lock()
	c.released = true
	c.mu.Unlock()
}

// Stats returns the claim's figures.
func (c *Claim) Stats() PartitionStats {
	ps := PartitionStats{
		Topic:           c.Topic,
		Partition:       c.Part,
		GenerationID:    c.Generation,
		Committed:       c.Committed.Load(),
		Marked:          c.Marked.Load(),
		Next:            c.Next.Load(),
		ReadAhead:       int(c.ReadAhead.Load()),
		FailedCommitted: c.CommittedPast.Load(),
	}
	ps.HighWater = c.listedHW.Load()
	if c.highWater != nil {
		ps.HighWater = max(ps.HighWater, c.highWater())
	}
	ps.Lag, ps.FetchLag = kafkaoffset.Lag(ps.HighWater, ps.Committed, c.start.Load(), ps.Next)
	ps.InFlight = c.Pending()
	return ps
}

// NoteHighWater records hw, the partition's end offset as the member
// listed it (Member.HighWaterLoop): the client stops fetching a partition
// whose records wait to be delivered, and the high-water mark of its last
// fetch then misses what was produced since. Stats reports the higher of
// the two. hw replaces the end listed before, even when lower: the log of
// a partition truncated, or of a topic deleted and created again, ends
// lower now.
func (c *Claim) NoteHighWater(hw int64) { c.listedHW.Store(hw) }

// Begin sets where a claim whose start was not known when it was created
// starts: committed is the group's committed offset (-1 when none) and
// start the offset of the first record it reads (-1 when unknown). It is
// called before any record of the claim is delivered.
func (c *Claim) Begin(committed, start int64) {
	committed = max(committed, -1)
	c.Committed.Store(committed)
	c.Marked.Store(committed)
	c.Next.Store(max(start, -1))
	c.start.Store(max(start, -1))
	c.mu.Lock()
	c.cp.Reset(uint64(max(start, 0)))
	c.failedAhead = c.failedAhead[:0]
	c.mu.Unlock()
}
