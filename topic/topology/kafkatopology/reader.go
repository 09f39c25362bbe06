package kafkatopology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkalimits"
	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
	"github.com/boulevard-go/boulevard/internal/kafkatopicid"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/logattr"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/goexit"
	"github.com/boulevard-go/boulevard/topic/internal/hookcall"
	"github.com/boulevard-go/boulevard/topic/internal/undecodable"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// ErrCatchUp is returned by TryReceive when the reader could not fetch
// what the log held within Options.AdminTimeout, or before its context
// ended; it wraps the context's error.
var ErrCatchUp = errors.New("kafkatopology: the reader did not catch up with the log")

// ErrNotCommitted is returned by Settle for a letter whose hand-off (hold,
// requeue or dead-lettering) failed: it is left uncommitted, to be
// delivered again.
var ErrNotCommitted = errors.New("kafkatopology: not committed, its hand-off failed; it will be delivered again")

// ErrRevoked is returned by Settle for a letter whose partition the
// reader let go before the letter was settled: after RevokeTimeout in a
// rebalance, or when the reader closed. The reader commits nothing of it
// any more, and the group delivers it again to the partition's new owner.
var ErrRevoked = errors.New("kafkatopology: partition revoked before the letter was settled; the group delivers it again")

// ErrCorruptBatch is wrapped by the error a reader's Receive and
// TryReceive return (a group reader's and a broadcast reader's), once
// they have handed out what was already fetched, when a partition of its
// topic holds a record batch the client cannot
// decode (its CRC does not match, a length or a compression codec that
// does not hold) or the broker answers its fetch with CORRUPT_MESSAGE:
// fetching again returns the same bytes, and skipping them would lose
// their letters, so the reader stops there, as Kafka's Java consumer
// does: a group reader's sessions end (what it did not settle is
// delivered again to the group once it is closed), and a broadcast
// reader buffers nothing fetched after it. The error names the partition and the offset it
// reads from, and wraps sarama's error; the backend logs it once, at
// ERROR.
var ErrCorruptBatch = errors.New("kafkatopology: record batch cannot be decoded")

// buffer is a reader's read-ahead: fetched letters waiting for Receive.
type buffer[T any] struct {
	mu      sync.Mutex
	items   []topology.Letter[T]
	head    int
	cap     int
	closed  bool
	stop    chan struct{} // closed by close
	sig     chan struct{} // cap 1: something to receive, or closed
	room    chan struct{} // closed (and replaced) when items has room again
	fetched chan struct{} // cap 1: a claim's position moved
	// failed, once set, is what receive returns when nothing is buffered:
	// the reader stopped consuming (a partition that cannot be decoded).
	failed  error
	failing bool // fail was called
	// taken, when set, is told (with mu held) of the letters take hands out.
	taken func([]topology.Letter[T])
	// undecodable counts the records the reader skipped because they do
	// not decode.
	undecodable atomic.Uint64
	// undecodableLines holds back, per partition, the lines of records
	// that do not decode that follow the last one logged by less than
	// logburst.Interval.
	undecodableLines logburst.Keyed[int32]
}

// Undecodable implements topology.UndecodableCounter: the records the
// reader skipped and committed past (a broadcast reader: skipped) because
// they do not decode; those for another group are not counted. Each is
// counted; per partition, the first is logged at WARN with its offset and
// error, and the like ones within logburst.Interval of the last line are
// counted in the partition's next line (held_back, with the first and the
// last offset held back), or in one logged as the reader closes or its
// claim of the partition ends.
func (bf *buffer[T]) Undecodable() uint64 { return bf.undecodable.Load() }

func newBuffer[T any](capacity int, log *slog.Logger) buffer[T] {
	return buffer[T]{cap: capacity, stop: make(chan struct{}), sig: make(chan struct{}, 1), fetched: make(chan struct{}, 1),
		undecodableLines: logburst.Keyed[int32]{Log: log, Level: slog.LevelWarn, Msg: "kafkatopology: record does not decode; skipped and committed"}}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waitRoom waits, with mu held (and released while waiting), until the
// buffer has room; false when done or the buffer closed first.
func (bf *buffer[T]) waitRoom(done <-chan struct{}) bool {
	for len(bf.items)-bf.head >= bf.cap {
		if bf.closed {
			return false
		}
		if bf.room == nil {
			bf.room = make(chan struct{})
		}
		room := bf.room
		bf.mu.Unlock()
		select {
		case <-room:
		case <-done:
			bf.mu.Lock()
			return false
		case <-bf.stop:
		}
		bf.mu.Lock()
	}
	return !bf.closed
}

// take moves up to len(dst) letters to dst; the caller holds mu.
func (bf *buffer[T]) take(dst []topology.Letter[T]) int {
	n := copy(dst, bf.items[bf.head:])
	clear(bf.items[bf.head : bf.head+n])
	bf.head += n
	if bf.head == len(bf.items) {
		bf.items, bf.head = bf.items[:0], 0
	} else if bf.head > 1024 && bf.head > len(bf.items)/2 {
		k := copy(bf.items, bf.items[bf.head:])
		clear(bf.items[k:])
		bf.items, bf.head = bf.items[:k], 0
	}
	if n > 0 && bf.room != nil {
		close(bf.room)
		bf.room = nil
	}
	if n > 0 && bf.taken != nil {
		bf.taken(dst[:n])
	}
	return n
}

// receive implements Reader.Receive over the buffer.
func (bf *buffer[T]) receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if len(dst) == 0 {
		return 0, topology.ErrEmptyDst
	}
	for {
		bf.mu.Lock()
		if bf.closed {
			bf.mu.Unlock()
			return 0, topology.ErrClosed
		}
		n := bf.take(dst)
		failed := bf.failed
		bf.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		if failed != nil {
			return 0, failed
		}
		select {
		case <-bf.sig:
		case <-bf.stop:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// fail sets err as what receive returns once nothing is buffered, and
// wakes the receivers, the first time it is called: it runs first (the
// log line) before any receiver can see err, and reports whether it did.
func (bf *buffer[T]) fail(err error, first func()) bool {
	bf.mu.Lock()
	if bf.failing {
		bf.mu.Unlock()
		return false
	}
	bf.failing = true
	bf.mu.Unlock()
	first()
	bf.mu.Lock()
	bf.failed = err
	bf.mu.Unlock()
	notify(bf.sig)
	notify(bf.fetched)
	return true
}

// corruptFetch is the error for err, a fetch of topic/part from offset at
// (negative: not known) that cannot be decoded; one past
// sarama.MaxResponseSize says so (kafkarefusal.CorruptFetch).
func corruptFetch(topic string, part int32, at int64, err error) error {
	return kafkarefusal.CorruptFetch(ErrCorruptBatch, topic, part, at, err)
}

// close ends the buffer; it reports whether it was open.
func (bf *buffer[T]) close() bool {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	if bf.closed {
		return false
	}
	bf.closed = true
	close(bf.stop)
	return true
}

// groupReader is a member of a Kafka consumer group on one topic. Each
// claimed partition tracks its fetched offsets in order; Settle marks the
// contiguous prefix of settled ones for commit.
type groupReader[T any] struct {
	buffer[T]
	// reach tells the observer the subscriber sets whether the member can
	// read (its sessions, records, the answers its client reads and
	// fetches an ACL refuses).
	*reach
	b      *Backend[T]
	topic  string
	gid    string
	group  string        // the group whose targeted records it delivers
	client sarama.Client // cg's
	cg     sarama.ConsumerGroup
	conns  *kafkaconn.Set // client's connections, cut when Close's ctx ends
	// id keeps the topic's ID (Kafka 2.8's metadata v10 on) as of the
	// latest session's Setup, checked every Options.HighWaterInterval: a
	// change (the topic deleted and created again, no fetch failing) ends
	// the session (endChanged).
	id      kafkatopicid.Watch
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when loop returns
	closing liveset.Closing
	// lastMu guards lastCut, which cuts conns Options.AdminTimeout after
	// the context of a Close ended first (see Close), and lastDone, set
	// once the closing has ended.
	lastMu   sync.Mutex
	lastCut  func() bool
	lastDone bool
	// fails are the group's failures that go on, logged at growing
	// intervals.
	fails repeatlog.Group

	// guarded by buffer.mu
	claims  map[int32]*claim
	inSess  bool  // a session is running
	joined  bool  // a session has started once
	gen     int32 // the group's generation as the session began
	lastErr error
	waiting int // claims waiting for their letters in flight before letting go
	// onRelease is what OnRelease set: called while a claim waits for
	// its letters in flight before letting go. Nil: none.
	onRelease func() (done func())
	// onShards is what OnShards set: told of each claim let go of, and
	// of each assignment. Nil: none.
	onShards func(topology.ShardChange, func(shard int) bool)
	// owned are the partitions of the session's assignment: Setup's,
	// less those a cooperative rebalance revoked since (see release),
	// plus those it assigned since (see ConsumeClaim). TryReceive has
	// caught up once it has fetched each of them (holdsAll).
	owned map[int32]bool
	// pins are the ends PinEnd pinned, each partition's log end as it
	// was then (a partition not in it has none: 0); nil while not pinned.
	// No record at or past its partition's end is buffered once they are
	// set.
	pins map[int32]int64
	// endSess ends the session Consume runs (nil between them), and
	// goneAt is the partition whose fetch found the topic unknown, which
	// ended it (-1: none); see endGone.
	endSess context.CancelFunc
	goneAt  int32

	// shardsMu keeps what is told to onShards in order (tellShards).
	shardsMu sync.Mutex
}

// claim is one partition of one session: its settled offsets and the
// letters of it handed out (kafkaoffset.Claim), and how far it fetched.
type claim struct {
	*kafkaoffset.Claim
	part int32
	next int64 // the offset after the last fetched
	// start is where the claim started: Lag counts from it while the
	// group has no committed offset.
	start int64
	// committed is the group's committed offset as the claim began, -1
	// when it had none.
	committed int64
	hw        highWater // the claim's consumer
	// letGo is set as the claim starts to let its partition go (see
	// release), before it tells so, and stays set: the letters of it
	// handed out then go back to the group (see LetGo).
	letGo atomic.Bool
	// fetchErr is the error of the partition's last failed fetch, at
	// fetchErrAt; nil once a record of it is fetched. Guarded by the
	// reader's mu.
	fetchErr   error
	fetchErrAt time.Time
}

// highWater is what a sarama group claim offers to read its partition's
// high-water mark (from its latest fetch response, atomically).
type highWater interface{ HighWaterMarkOffset() int64 }

// stats returns the claim's figures, with its last fetch error while it
// is younger than quiet, and as its high-water mark the greater of its
// latest fetch's and listed, the log end the backend listed last; the
// caller holds the reader's mu.
func (c *claim) stats(topic, gid string, quiet time.Duration, listed int64) PartitionStats {
	committed := c.committed
	if m := c.Marked(); m >= 0 {
		committed = m
	}
	ps := partitionFigures(topic, c.part, committed, c.start, c.next, max(c.hw.HighWaterMarkOffset(), listed))
	ps.Group = gid
	if c.fetchErr != nil && time.Since(c.fetchErrAt) < quiet {
		ps.FetchErr = c.fetchErr
	}
	return ps
}

// partitionFigures returns the figures of a claim of topic's partition
// part (see kafkaoffset.Lag): the offset committed or marked for commit
// (-1: none), where the claim started, the offset of the next record to
// fetch and the partition's high-water mark.
func partitionFigures(topic string, part int32, committed, start, next, highWater int64) PartitionStats {
	ps := PartitionStats{Topic: topic, Partition: part, Committed: committed, Next: next, HighWater: highWater}
	ps.Lag, ps.FetchLag = kafkaoffset.Lag(highWater, committed, start, next)
	return ps
}

// appendPartitions appends the figures of the partitions the reader
// claims to out.
func (r *groupReader[T]) appendPartitions(out []PartitionStats) []PartitionStats {
	quiet := max(kafkareach.HeardQuiet, 2*r.b.cfg.Consumer.Retry.Backoff)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.claims {
		out = append(out, c.stats(r.topic, r.gid, quiet, r.b.ends.End(r.topic, c.part)))
	}
	return out
}

// appendRead appends the partitions the reader claims to out.
func (r *groupReader[T]) appendRead(out []topicPartition) []topicPartition {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.claims {
		out = append(out, topicPartition{Topic: r.topic, Part: c.part})
	}
	return out
}

// receipt is a letter's handle on its record.
type receipt struct {
	owner any         // the reader
	mu    *sync.Mutex // the reader's
	c     *claim
	off   int64
	kept  bool // its hand-off failed: never commit it
	done  bool // settled
}

// keep marks the receipt's record never to be committed (kept true, its
// hand-off failed), or to be committed again (false, a later hand-off
// succeeded).
func (rc *receipt) keep(kept bool) {
	rc.mu.Lock()
	rc.kept = kept
	rc.mu.Unlock()
}

// giveBack marks the receipt's record never to be committed and no longer
// held by the subscriber: its claim lets its partition go without waiting
// for it, and the partition's next owner fetches it again.
func (rc *receipt) giveBack() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.kept = true
	if !rc.done {
		rc.done = true
		rc.c.Return()
	}
}

var (
	_ topology.UndecodableCounter = (*groupReader[int])(nil)
	_ topology.ReleaseNotifier    = (*groupReader[int])(nil)
	_ topology.ShardNotifier      = (*groupReader[int])(nil)
	_ topology.PartTracker        = (*groupReader[int])(nil)
	_ topology.ReachReporter      = (*groupReader[int])(nil)
	_ topology.EndPinner          = (*groupReader[int])(nil)
)

// OnShards implements topology.ShardNotifier: f is told of each
// partition the reader lets go of (revoked, or lost with its session)
// and of each group session's assignment, with the routing shards in
// them (a shard's letters go to one partition, see Backend.partition),
// one call at a time. Under a cooperative rebalance protocol the session
// goes on across rebalances, and Setup sees only its first assignment: a
// partition a rebalance revokes within the session is told let go of,
// then the assignment left without it (see release); one a rebalance
// assigns within the session is told as its claim starts, by the
// assignment with it.
func (r *groupReader[T]) OnShards(f func(topology.ShardChange, func(shard int) bool)) {
	r.mu.Lock()
	r.onShards = f
	r.mu.Unlock()
}

// tellShards tells what OnShards set, if anything, unless the reader is
// closing, of change, with the routing shards of the partitions parts
// returns (called with mu held, whether or not it tells: parts may move
// the reader's assignment on; see shardsIn for unknown). It tells
// without mu, which the subscriber takes as it gives letters back
// (Queues.Return), and one call at a time, each with what it took of
// the reader as it began: the assignments reach the subscriber in the
// order they were made, from whichever of the client's goroutines.
func (r *groupReader[T]) tellShards(change topology.ShardChange, unknown bool, parts func() []int32) {
	r.shardsMu.Lock()
	defer r.shardsMu.Unlock()
	r.mu.Lock()
	f := r.onShards
	ps := parts()
	if r.closed {
		f = nil
	}
	r.mu.Unlock()
	if f != nil {
		f(change, r.shardsIn(unknown, ps...))
	}
}

// LetGo implements topology.PartTracker: whether the claim of the
// partition that handed out the letter whose receipt is rc began to let
// the partition go (see release). A claim that let go stays so: the
// partition assigned again has a new claim.
func (r *groupReader[T]) LetGo(rc any) bool {
	c, ok := rc.(*receipt)
	return ok && c.owner == any(r) && c.c.letGo.Load()
}

// ownedParts returns the partitions of r.owned; mu is held.
func (r *groupReader[T]) ownedParts() []int32 {
	return slices.Collect(maps.Keys(r.owned))
}

// holdsAll reports whether the reader's claims are the partitions of
// its session's assignment as it stands (r.owned), each one started;
// mu is held. Under an eager strategy that is Setup's whole assignment;
// under a cooperative one, what the session's rebalances left it.
func (r *groupReader[T]) holdsAll() bool {
	if len(r.claims) != len(r.owned) {
		return false
	}
	for p := range r.owned {
		if r.claims[p] == nil {
			return false
		}
	}
	return true
}

// shardsIn returns what tells whether a routing shard's letters go to
// one of parts (see shardPartition), by the topic's partitions in the
// shared client's metadata. When the metadata has none it answers
// unknown for every shard: true for an assignment (a sequenced source
// then keeps what it knows of its keys), false for a partition let go of
// (it then gives back none of the letters it holds back, which the
// release waits for as for any other).
func (r *groupReader[T]) shardsIn(unknown bool, parts ...int32) func(shard int) bool {
	var ps []int32
	if !r.b.client.PartitionNotReadable(r.topic, 0) {
		ps, _ = r.b.client.Partitions(r.topic)
	}
	if len(ps) == 0 {
		return func(int) bool { return unknown }
	}
	return func(shard int) bool { return slices.Contains(parts, shardPartition(ps, shard)) }
}

// OnRelease implements topology.ReleaseNotifier: f is called while a
// claim the group takes away waits up to Options.RevokeTimeout for its
// letters handed out, and its done once the claim is committed.
func (r *groupReader[T]) OnRelease(f func() (done func())) {
	r.mu.Lock()
	r.onRelease = f
	r.mu.Unlock()
}

// newGroupReader makes a member of consumer group gid on kname, whose
// client dials through d (see bounded).
func newGroupReader[T any](b *Backend[T], d *dialing, kname, gid, group string) (*groupReader[T], error) {
	cfg, conns := d.child(b.cfg)
	rch := newReach(cfg)
	// The partitions from the shared client's metadata, which Declare
	// filled; unknown there, the whole read-ahead for each partition.
	parts := 1
	if !b.client.PartitionNotReadable(kname, 0) {
		if ps, err := b.client.Partitions(kname); err == nil {
			parts = len(ps)
		}
	}
	kafkalimits.ShareChannels(cfg, parts, b.opts.ReadAhead)
	client, err := sarama.NewClient(b.opts.Brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: consumer group %q: %w", ErrConnect, gid, b.red.Err(err))
	}
	cg, err := sarama.NewConsumerGroupFromClient(gid, client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("%w: consumer group %q: %w", ErrConnect, gid, b.red.Err(err))
	}
	if !d.settle() {
		_ = cg.Close()
		_ = client.Close()
		return nil, errCutShort
	}
	r := &groupReader[T]{buffer: newBuffer[T](b.opts.ReadAhead, b.log), reach: rch, b: b, topic: kname, gid: gid, group: group,
		client: client, cg: cg, conns: conns, done: make(chan struct{}), claims: map[int32]*claim{}, goneAt: -1,
		id: kafkatopicid.Watch{Client: client, Topic: kname}, fails: repeatlog.Group{Prefix: "kafkatopology", Log: b.log}}
	r.taken = func(ls []topology.Letter[T]) {
		for i := range ls {
			if rc, ok := ls[i].Receipt.(*receipt); ok {
				rc.c.Hand()
			}
		}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if !b.track(r) {
		r.cancel()
		_ = cg.Close()
		_ = client.Close()
		return nil, topology.ErrClosed
	}
	go r.loop()
	return r, nil
}

// loop runs the group sessions one after the other and logs the group's
// errors, until the reader closes. A failure that goes on (the cluster
// cannot be reached: each partition's fetch fails, then each session) is
// logged when it begins and then at growing intervals, per error text
// (the partitions failing alike share one run) or for the sessions
// (repeatlog.Group), not once per retry nor per partition; it ends, with
// one INFO line, when the last of its partitions delivers a record or a
// session starts.
func (r *groupReader[T]) loop() {
	defer close(r.done)
	var wg sync.WaitGroup
	wg.Go(func() {
		for err := range r.cg.Errors() {
			ce, ok := err.(*sarama.ConsumerError)
			if ok && ce.Topic != "" && kafkarefusal.SaramaCorrupt(ce.Err) {
				r.failCorrupt(ce)
				continue
			}
			red := r.b.red.Err(err)
			part, cause := int32(-1), error(nil)
			if ok && ce.Topic != "" {
				part, cause = ce.Partition, ce.Err
				if ce.Topic == r.topic && errors.Is(ce.Err, sarama.ErrUnknownTopicOrPartition) {
					r.endGone(part)
				}
				r.noteFetchErr(part, red)
			}
			r.rule.SaramaError(red)
			r.fails.Error(r.ctx, part, err, cause, slog.String("topic", r.topic), slog.String("group", r.gid))
		}
	})
	wg.Go(func() { r.id.Run(r.b.opts.HighWaterInterval, r.ctx.Done(), r.endChanged) })
	defer wg.Wait()
	backoff := r.b.cfg.Consumer.Group.Rebalance.Retry.Backoff
	gone := int32(-1) // the partition whose fetch found the topic unknown
	for {
		ctx, end := context.WithCancel(r.ctx)
		r.mu.Lock()
		r.endSess, r.goneAt = end, -1
		r.mu.Unlock()
		err := r.cg.Consume(ctx, []string{r.topic}, r)
		r.mu.Lock()
		r.endSess = nil
		if r.goneAt >= 0 {
			gone = r.goneAt
		} else if err == nil || !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			gone = -1
		}
		r.mu.Unlock()
		end()
		if r.ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return
		}
		if err != nil {
			r.mu.Lock()
			r.lastErr = err
			r.mu.Unlock()
			if gone >= 0 {
				// The topic is still unknown: a repeat of the failure
				// of the fetch that found it so, in that run.
				r.fails.Error(r.ctx, gone, err, err, slog.String("topic", r.topic), slog.String("group", r.gid))
			} else {
				r.fails.SessionFailed(r.ctx, slog.String("topic", r.topic), slog.String("group", r.gid), slog.Any("error", err))
			}
			r.rule.SaramaSessionFailed(r.b.red.Err(err))
		}
		if err != nil || gone >= 0 {
			if !sleep(r.ctx, backoff) {
				return
			}
		}
	}
}

// endGone ends the session running, if any, for part, a claimed
// partition whose fetch found the reader's topic unknown: the topic was
// deleted, and Kafka drops the group's offsets with it. The session's
// consumers would go on from their positions in the deleted topic, and
// read one created again under the same name from there, past the
// records below them. Its claims let their partitions go as on any
// revoke, and the group joins again after
// Consumer.Group.Rebalance.Retry.Backoff, once the topic exists, from the
// group's offsets in it.
func (r *groupReader[T]) endGone(part int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.endSess == nil || r.goneAt >= 0 {
		return
	}
	r.goneAt = part
	r.endSess()
}

// endChanged ends the session running, if any, the reader having seen its
// topic's ID change: the topic was deleted and created again with no
// fetch of it failing (its read-ahead full, or between two fetches), and
// the session's consumers would go on from their positions in the old
// topic, past the records of the new one below them. As endGone, it lets
// the group join again, from its offsets in the new topic (Kafka dropped
// the old ones with the topic).
func (r *groupReader[T]) endChanged() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.endSess == nil {
		return
	}
	r.b.log.Info("kafkatopology: group reader's topic was created again (its topic ID changed); the session ends",
		slog.String("topic", r.topic), slog.String("group", r.gid))
	r.endSess()
}

// noteFetchErr notes err, a failed fetch of partition part, in its
// claim's figures (PartitionStats.FetchErr).
func (r *groupReader[T]) noteFetchErr(part int32, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.claims[part]; ok {
		c.fetchErr, c.fetchErrAt = err, time.Now()
	}
}

// failCorrupt stops the reader's consuming for ce, a fetch of a claimed
// partition that cannot be decoded (kafkarefusal.SaramaCorrupt): sarama
// fetches the same bytes again for ever, and skipping them would lose
// their letters. The first such error is logged at ERROR, naming the
// partition and the offset its claim reads from, and is what Receive and
// TryReceive return, wrapped in ErrCorruptBatch, once they have handed
// out what was buffered; later errors of the kind are not logged. The
// group sessions end (loop returns); Close leaves the group.
func (r *groupReader[T]) failCorrupt(ce *sarama.ConsumerError) {
	at := int64(-1)
	r.mu.Lock()
	if c, ok := r.claims[ce.Partition]; ok {
		at = c.next
	}
	r.mu.Unlock()
	if r.fail(corruptFetch(ce.Topic, ce.Partition, at, r.b.red.Err(ce.Err)), func() {
		r.b.log.Error("kafkatopology: partition fetch cannot be decoded; the reader stops", slog.String("topic", ce.Topic),
			slog.String("group", r.gid), slog.Int("partition", int(ce.Partition)), slog.Int64("offset", at), slog.Any("error", ce.Err))
	}) {
		r.cancel()
	}
}

// Setup implements sarama.ConsumerGroupHandler; a session that starts ends
// the runs of failures logged (the cluster answers), and a degrade
// reported to the observer set (ReportReach).
func (r *groupReader[T]) Setup(sess sarama.ConsumerGroupSession) error {
	// The ID of the topic the session reads: a failed request keeps the
	// one before.
	_ = r.id.Start()
	r.rule.SessionStarted()
	r.mu.Lock()
	r.inSess, r.joined, r.gen = true, true, sess.GenerationID()
	r.owned = map[int32]bool{}
	for _, p := range sess.Claims()[r.topic] {
		r.owned[p] = true
	}
	r.mu.Unlock()
	// Before any claim of the session hands out a letter: the claims
	// start once Setup has returned.
	r.tellShards(topology.ShardsAssigned, true, r.ownedParts)
	r.fails.Started(r.ctx)
	notify(r.fetched)
	r.b.log.Info(SessionStartedLog, slog.String("topic", r.topic), slog.String("group", r.gid),
		slog.String("member", sess.MemberID()), slog.Int("generation", int(sess.GenerationID())),
		logattr.Partitions("claims", sess.Claims()))
	return nil
}

// SessionStartedLog and SessionEndedLog are the INFO lines of a group
// reader's session, one each a rebalance, as the Kafka source logs its
// own: the first names the partitions the reader claims (claims), both the
// member id and the group's generation.
const (
	SessionStartedLog = "kafkatopology: group session started"
	SessionEndedLog   = "kafkatopology: group session ended"
)

// Cleanup implements sarama.ConsumerGroupHandler.
func (r *groupReader[T]) Cleanup(sess sarama.ConsumerGroupSession) error {
	r.rule.SessionEnded()
	r.mu.Lock()
	r.inSess = false
	r.mu.Unlock()
	r.b.log.Info(SessionEndedLog, slog.String("topic", r.topic), slog.String("group", r.gid),
		slog.String("member", sess.MemberID()), slog.Int("generation", int(sess.GenerationID())))
	return nil
}

// ConsumeClaim implements sarama.ConsumerGroupHandler: it buffers the
// partition's records for Receive, skipping (and settling) those for
// another group and those that do not decode.
func (r *groupReader[T]) ConsumeClaim(sess sarama.ConsumerGroupSession, gc sarama.ConsumerGroupClaim) error {
	r.mu.Lock()
	added := !r.owned[gc.Partition()]
	r.mu.Unlock()
	if added {
		// A cooperative rebalance assigned the partition within the
		// session, which goes on across rebalances: the reader did not
		// hold it in the generation before (a rebalance that revoked it
		// earlier told the assignment left without it, see release).
		// The generation's whole assignment, with the partitions the
		// rebalance assigned beside it, goes before the claim hands out
		// a letter: told one partition at a time, an assignment would
		// leave out for a while the shards of the others, whose keys'
		// messages out come back here.
		r.tellShards(topology.ShardsAssigned, true, func() []int32 {
			for _, p := range sess.Claims()[r.topic] {
				r.owned[p] = true
			}
			r.owned[gc.Partition()] = true
			return r.ownedParts()
		})
	}
	c := &claim{Claim: kafkaoffset.New(sess, r.topic, gc.Partition()), part: gc.Partition(), next: gc.InitialOffset(),
		committed: max(gc.InitialOffset(), -1), hw: gc}
	if c.next < 0 {
		off, err := r.startOffset(sess.Context(), c.part, c.next)
		if errors.Is(err, topology.ErrClosed) {
			return nil // the backend closes the reader too
		}
		if err != nil {
			return err
		}
		c.next = off
	}
	c.start = c.next
	r.mu.Lock()
	r.claims[c.part] = c
	r.mu.Unlock()
	notify(r.fetched)
	defer r.release(c, sess)
	// decoding is the record being decoded, nil between records: a Goexit
	// of the codec ends the goroutine while it is set.
	var decoding *sarama.ConsumerMessage
	loop := func() {
		for {
			select {
			case rec, ok := <-gc.Messages():
				if !ok {
					return
				}
				r.fails.Fetched(r.ctx, rec.Partition)
				r.rule.Reading()
				decoding = rec
				l, skip := r.decode(rec)
				decoding = nil
				r.mu.Lock()
				c.fetchErr = nil
				if r.pastPin(rec.Partition, rec.Offset) {
					// The record and those after it stay for the
					// group's next reader; the claim reads no more.
					c.next = rec.Offset
					r.mu.Unlock()
					notify(r.fetched)
					<-sess.Context().Done()
					return
				}
				if skip {
					c.next = rec.Offset + 1
					c.Skip(rec.Offset)
				} else {
					// The claim's position moves past the record only
					// once it is buffered: TryReceive counts a partition
					// read to its end by it, and must not while the
					// record waits for room.
					if !r.waitRoom(sess.Context().Done()) {
						r.mu.Unlock()
						return
					}
					c.next = rec.Offset + 1
					c.Fetch(rec.Offset)
					l.Receipt = &receipt{owner: r, mu: &r.mu, c: c, off: rec.Offset}
					r.items = append(r.items, l)
					notify(r.sig)
				}
				r.mu.Unlock()
				notify(r.fetched)
			case <-sess.Context().Done():
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
		r.undecodable.Add(1)
		r.logUndecodable(rec, message.ErrHandlerExited, slog.String("stack", stack))
		r.mu.Lock()
		c.next = rec.Offset + 1
		c.Skip(rec.Offset)
		r.mu.Unlock()
		notify(r.fetched)
		return true
	})
	return nil
}

// startOffset resolves a claim's initial offset at (sarama.OffsetNewest or
// OffsetOldest) to the offset it stands for, bounded by ctx (the
// session's) and Options.AdminTimeout.
func (r *groupReader[T]) startOffset(ctx context.Context, part int32, at int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.b.opts.AdminTimeout)
	defer cancel()
	offs, err := r.b.offsets(ctx, r.topic, []int32{part}, at)
	if err != nil {
		return 0, err
	}
	return offs[part], nil
}

// decode turns rec into a letter; skip when it is for another group or
// does not decode (counted).
func (r *groupReader[T]) decode(rec *sarama.ConsumerMessage) (topology.Letter[T], bool) {
	l, m, err := r.readLetter(r.b, rec)
	if err != nil {
		return l, true
	}
	return l, m.group != "" && m.group != r.group
}

// readLetter decodes a record (decodeLetter); one that does not decode
// is counted and logged (logUndecodable).
func (bf *buffer[T]) readLetter(b *Backend[T], rec *sarama.ConsumerMessage) (topology.Letter[T], meta, error) {
	l, m, err := decodeLetter(b, rec)
	if err != nil {
		bf.undecodable.Add(1)
		bf.logUndecodable(rec, err)
	}
	return l, m, err
}

// decodeLetter decodes a record: its history headers and its value.
func decodeLetter[T any](b *Backend[T], rec *sarama.ConsumerMessage) (topology.Letter[T], meta, error) {
	var l topology.Letter[T]
	m, err := readHeaders(rec, &l)
	if err == nil {
		l.Value, err = topic.Decode(b.opts.Codec, rec.Value)
	}
	return l, m, err
}

// logUndecodable logs the line of a record that does not decode (see
// undecodable.LogKafka).
func (bf *buffer[T]) logUndecodable(rec *sarama.ConsumerMessage, err error, attrs ...slog.Attr) {
	undecodable.LogKafka(context.Background(), &bf.undecodableLines, rec, err, attrs...)
}

// ReleasedHeldLog is the WARN line of a group reader whose partition the
// group moved while letters of it it had handed out were still unsettled
// when Options.RevokeTimeout ran out: the partition's next owner delivers
// them again, and their settling here commits nothing.
const ReleasedHeldLog = "kafkatopology: partition released with letters still unsettled; they will be delivered again"

// release ends a claim of sess: its buffered letters are dropped (the
// partition's next owner fetches them again); the letters of it handed
// out get up to Options.RevokeTimeout to be settled (none when the
// reader is closing), what is settled is committed, and later settles
// commit nothing. While it waits, the OnRelease set hurries their
// settlement.
func (r *groupReader[T]) release(c *claim, sess sarama.ConsumerGroupSession) {
	c.letGo.Store(true)
	r.mu.Lock()
	goesOn := sess.Context().Err() == nil && sess.GenerationID() != r.gen
	if goesOn {
		// The session goes on without the partition, in a generation
		// after its first: a cooperative rebalance revoked it (which
		// comes with a new generation), or its consumer stopped after
		// one, which ends the session next. Nothing of it reaches the
		// reader until a rebalance assigns it again (ConsumeClaim), and
		// the assignment left without it is told below; a session that
		// ends instead starts a new one from Setup. A claim that ends
		// in the session's first generation (its only one under an
		// eager strategy) ends it too: the session still holds the
		// partition until then, and TryReceive has not caught up.
		delete(r.owned, c.part)
	}
	k := r.head
	for i := r.head; i < len(r.items); i++ {
		if rc, _ := r.items[i].Receipt.(*receipt); rc == nil || rc.c != c {
			r.items[k] = r.items[i]
			k++
		}
	}
	clear(r.items[k:])
	r.items = r.items[:k]
	if r.onShards != nil && !r.closed {
		// The subscriber gives back (Queues.Return) the letters of the
		// partition it holds back, which the wait below then does not
		// wait for. A session that goes on reads on from the partitions
		// left, which may hold letters of the shards the partition
		// count routes to this one (partitions were added): told the
		// assignment left, the subscriber stops holding them back for
		// a key's message out, which comes back to the partition's new
		// owner.
		r.mu.Unlock()
		r.tellShards(topology.ShardsReleased, false, func() []int32 { return []int32{c.part} })
		if goesOn {
			r.tellShards(topology.ShardsAssigned, true, r.ownedParts)
		}
		r.mu.Lock()
	}
	if f := r.onRelease; f != nil && c.Handed() > 0 && r.b.opts.RevokeTimeout > 0 && !r.closed {
		// Called without mu: the subscriber may settle at once.
		r.mu.Unlock()
		if done := hookcall.Release(r.b.log, f, slog.String("topic", r.topic), slog.String("group", r.gid),
			slog.Int("partition", int(c.part))); done != nil {
			defer done()
		}
		r.mu.Lock()
	}
	// Counted while Release waits (it lets go of mu only then); r.stop is
	// closed when r.closed is set, both under mu.
	r.waiting++
	left := c.Release(&r.mu, r.stop, r.b.opts.RevokeTimeout)
	r.waiting--
	if r.claims[c.part] == c {
		delete(r.claims, c.part)
	}
	r.mu.Unlock()
	notify(r.fetched) // a TryReceive may now hold all it needs to
	if left > 0 {
		r.b.log.Warn(ReleasedHeldLog, slog.String("topic", r.topic), slog.String("group", r.gid),
			slog.Int("partition", int(c.part)), slog.Int("held", left), slog.Duration("revoke_timeout", r.b.opts.RevokeTimeout))
	}
	c.Commit()
	r.undecodableLines.Forget(context.Background(), c.part)
}

// Receive implements topology.Reader.
// A nil ctx returns topology.ErrNilContext, nothing consumed.
func (r *groupReader[T]) Receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if ctx == nil {
		return 0, topology.ErrNilContext
	}
	return r.receive(ctx, dst)
}

// TryReceive implements topology.Reader. A Kafka reader cannot tell that
// nothing is ready without asking: it returns at once what it has
// buffered; with nothing buffered it waits until it has joined its group
// and fetched, on every partition its session holds, up to the log end
// as of the call (or until something arrives), bounded by
// Options.AdminTimeout and by ctx, whichever ends first: it then returns
// ErrCatchUp wrapping the error of the one that ended
// (context.DeadlineExceeded, or context.Canceled for a cancelled ctx),
// even while the cluster has not answered its requests for the log ends
// (they go on in the background, see Backend.offsets). Under a
// cooperative rebalance protocol the session goes on across rebalances,
// and the partitions it holds are those they left it: not one revoked
// (once its claim has let it go), and one assigned after the session
// began once its claim has started.
// A nil ctx returns topology.ErrNilContext, nothing consumed.
func (r *groupReader[T]) TryReceive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if ctx == nil {
		return 0, topology.ErrNilContext
	}
	if len(dst) == 0 {
		return 0, topology.ErrEmptyDst
	}
	ctx, cancel := context.WithTimeout(ctx, r.b.opts.AdminTimeout)
	defer cancel()
	ends := map[int32]int64{}
	r.mu.Lock()
	pinned := r.pins != nil
	if pinned {
		ends = r.pins
	}
	r.mu.Unlock()
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return 0, topology.ErrClosed
		}
		if n := r.take(dst); n > 0 {
			r.mu.Unlock()
			return n, nil
		}
		if r.failed != nil {
			err := r.failed
			r.mu.Unlock()
			return 0, err
		}
		ready := r.joined && r.inSess && r.holdsAll()
		var parts []int32
		for p := range r.claims {
			if _, ok := ends[p]; !ok && ready && !pinned {
				parts = append(parts, p)
			}
		}
		r.mu.Unlock()
		if len(parts) > 0 { // the log ends as of the first look
			got, err := r.b.offsets(ctx, r.topic, parts, sarama.OffsetNewest)
			if errors.Is(err, topology.ErrClosed) {
				return 0, err
			}
			if ctx.Err() != nil {
				return 0, r.notCaughtUp(ctx, err)
			}
			maps.Copy(ends, got) // those that failed are asked again
		}
		if ready {
			// Checked with what was buffered, under one lock: a record
			// fetched meanwhile is either taken here or not yet counted.
			r.mu.Lock()
			n := r.take(dst)
			caught := r.inSess && r.holdsAll()
			for p, c := range r.claims {
				if end, ok := ends[p]; (!ok && !pinned) || c.next < end {
					caught = false
				}
			}
			r.mu.Unlock()
			if n > 0 || caught {
				return n, nil
			}
		}
		select {
		case <-r.fetched:
		case <-r.sig:
		case <-r.stop:
		case <-ctx.Done():
			return 0, r.notCaughtUp(ctx, nil)
		}
	}
}

// PinEnd implements topology.EndPinner: it asks the log end (high-water
// mark) of every partition of the reader's topic, through the backend's
// shared client, bounded by Options.AdminTimeout and by ctx (an error
// wrapping ErrAdmin or ErrMetadata and the context's error when the
// cluster has not answered by then). From then on the reader delivers no
// record at or past its partition's end, nor any of a partition added
// since: a claim stops reading its partition at its end, and the records
// past it buffered already are dropped. They are left uncommitted, for
// the group's next reader. TryReceive returns 0, nil once every
// partition the reader's session holds has been read to its end.
func (r *groupReader[T]) PinEnd(ctx context.Context) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	r.mu.Lock()
	closed, pinned := r.closed, r.pins != nil
	r.mu.Unlock()
	if closed {
		return topology.ErrClosed
	}
	if pinned {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.b.opts.AdminTimeout)
	defer cancel()
	parts, err := bounded(ctx, r.b, ErrMetadata, fmt.Sprintf("the partitions of topic %q", r.topic), func(*dialing) ([]int32, error) {
		if err := r.b.client.RefreshMetadata(r.topic); err != nil {
			return nil, fmt.Errorf("%w: topic %q: %w", ErrMetadata, r.topic, r.b.red.Err(err))
		}
		return r.b.client.Partitions(r.topic)
	})
	if err != nil {
		return err
	}
	ends, err := r.b.offsets(ctx, r.topic, parts, sarama.OffsetNewest)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return topology.ErrClosed
	}
	if r.pins != nil {
		return nil
	}
	r.pins = ends
	k := r.head
	for i := r.head; i < len(r.items); i++ {
		if rc, _ := r.items[i].Receipt.(*receipt); rc == nil || !r.pastPin(rc.c.part, rc.off) {
			r.items[k] = r.items[i]
			k++
		}
	}
	clear(r.items[k:])
	r.items = r.items[:k]
	if r.room != nil {
		close(r.room)
		r.room = nil
	}
	return nil
}

// pastPin reports whether the record at off of partition part is at or
// past the end PinEnd pinned (false while not pinned); mu is held.
func (r *groupReader[T]) pastPin(part int32, off int64) bool {
	if r.pins == nil {
		return false
	}
	return off >= r.pins[part]
}

// notCaughtUp is TryReceive's error once its ctx (the caller's, bounded
// by Options.AdminTimeout) ended: ErrCatchUp wrapping ctx.Err(), with err
// (what was under way) or else the group's last error.
func (r *groupReader[T]) notCaughtUp(ctx context.Context, err error) error {
	if err == nil {
		r.mu.Lock()
		err = r.lastErr
		r.mu.Unlock()
	}
	out := fmt.Errorf("%w: topic %q, group %q, within %s or the caller's deadline: %w", ErrCatchUp, r.topic, r.gid, r.b.opts.AdminTimeout, ctx.Err())
	if err != nil {
		out = fmt.Errorf("%w: %w", out, r.b.red.Err(err))
	}
	return out
}

// Settle implements topology.Reader: the letter's offset is settled, and
// its partition's contiguous prefix of settled offsets marked for commit.
// A letter whose hand-off failed is not (ErrNotCommitted), nor one whose
// partition the reader let go first (ErrRevoked). A nil letter, or one
// this reader did not hand out, settles nothing: nil.
func (r *groupReader[T]) Settle(_ context.Context, l *topology.Letter[T]) error {
	if l == nil {
		return nil
	}
	rc, ok := l.Receipt.(*receipt)
	if !ok || rc.owner != r {
		return nil
	}
	return r.settle(rc)
}

func (r *groupReader[T]) settle(rc *receipt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := rc.c
	if !rc.done {
		rc.done = true
		c.Return()
	}
	if rc.kept {
		return ErrNotCommitted
	}
	if c.Revoked() {
		return ErrRevoked
	}
	c.Settle(rc.off)
	return nil
}

// Close implements topology.Reader: the member commits what was settled
// and leaves its group; what it received and did not settle is delivered
// again to the group. It returns nil once that is done; if ctx ends
// first (or had ended), it returns an error wrapping ctx.Err() at once,
// and the closing goes on in the background for up to
// Options.AdminTimeout more, so that what was settled (letters handed off
// to a hold, requeued or dead-lettered among them) is still committed
// and the group does not deliver it again: a pipeline whose drain the
// shutdown timeout cuts short closes its source with a context already
// cancelled. Past that bound it cuts the member's connections, so that
// the commit and the leave, if the cluster does not answer them, fail at
// once instead of each waiting up to sarama's Net.ReadTimeout: what was
// settled and not yet committed is then delivered again, and the group
// moves the member's partitions once its session times out. The
// backend's Close waits for that closing, and cuts it at its own
// deadline. Idempotent: a later call waits, within its own ctx, for the
// same closing.
// A nil ctx returns topology.ErrNilContext and leaves the reader open:
// call Close again with a context.
func (r *groupReader[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	return await(ctx, r.shut(), r.cutLater, fmt.Sprintf("a reader of topic %q (group %q)", r.topic, r.gid))
}

// cutLater arms the cut of the reader's connections Options.AdminTimeout
// from its first call, unless the closing has ended.
func (r *groupReader[T]) cutLater() {
	r.lastMu.Lock()
	defer r.lastMu.Unlock()
	if r.lastCut == nil && !r.lastDone {
		r.lastCut = r.conns.CutAfter(r.b.opts.AdminTimeout)
	}
}

// shut ends the reader's receiving at once and starts its closing (once);
// the channel it returns is closed when the closing is done.
func (r *groupReader[T]) shut() <-chan struct{} {
	r.close()
	r.cancel()
	return r.closing.Start(func() {
		_ = r.cg.Close()
		<-r.done
		_ = r.client.Close()
		r.undecodableLines.Flush(context.Background())
		r.lastMu.Lock()
		r.lastDone = true
		if r.lastCut != nil {
			r.lastCut()
		}
		r.lastMu.Unlock()
		r.b.untrack(r)
	})
}
