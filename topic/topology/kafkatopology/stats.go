package kafkatopology

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

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaends"
	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/internal/repeatlog"
)

// ErrReleaseStalled is wrapped by Stall.Err: a releaser cannot go on
// releasing a hold topic, or a partition of one. The error wraps the
// cause too: ErrCorruptBatch for a partition holding a record batch that
// cannot be decoded, ErrMetadata or the producer's error for a letter
// that cannot be produced back to its main topic, sarama's error for a
// hold topic whose consumer group sessions fail (the cluster cannot be
// reached, the hold topic was deleted).
var ErrReleaseStalled = errors.New("kafkatopology: hold queue release stalled")

// Log lines of a failure that goes on: the first when it begins, then one
// after FirstRepeatLog, and each following one twice as long after the
// last, up to MaxRepeatLog apart (see Stall). The readers' consumer group
// errors and failed sessions are logged at the same intervals.
const (
	FirstRepeatLog = repeatlog.First
	MaxRepeatLog   = repeatlog.Max
)

// Stats is a snapshot of a Backend's state, for monitoring (see
// Backend.Stats).
type Stats struct {
	// Stalled are the hold topics, or partitions of them, that their
	// releaser in this backend cannot go on releasing, ordered by topic
	// and partition; empty while every releaser releases. A letter of a
	// stalled partition is not lost: it stays in its hold topic,
	// uncommitted, and is released once the cause is gone. Alert on a
	// stall that lasts (see Stall.Since).
	Stalled []Stall
	// SkippedHoldRecords counts the records of hold topics that the
	// releasers skipped, and committed past, because they carry no valid
	// due time, main topic and consumer group: records this backend did
	// not write (something else produced to a hold topic), logged at
	// WARN with their topic, partition and offset, a burst of them in a
	// few lines per partition that count the rest and give their first
	// and last offsets. They are lost to the topology; alert on any.
	SkippedHoldRecords uint64
	// Partitions are the partitions this backend's group readers claim
	// right now (the readers of main topics, and of dead-letter topics,
	// Subscribe and SubscribeDead make), and those its broadcast readers
	// read (every partition of the main topic, Group ""), with their lag,
	// ordered by group, topic and partition; empty while no reader claims
	// or reads any. A partition two readers of a group claim for a moment
	// of a rebalance is listed twice, the one furthest ahead (greatest
	// Committed, then Next) first; a partition that several broadcast
	// readers read is listed once per reader, the one furthest behind
	// (least Committed, then Next) first. The releasers of hold topics are
	// not listed: a hold topic's letters wait there until they are due, so
	// its backlog is the retry rate times the hold's delay by design, not
	// a sign that the backend falls behind (see Holds); a releaser that
	// cannot go on is in Stalled.
	Partitions []PartitionStats
	// Holds are the partitions of hold topics this backend's releasers
	// claim right now, with the letters waiting there to be released,
	// ordered by topic and partition; empty while no releaser claims any.
	// The partitions of a hold topic that the releasers of other
	// processes claim are listed by their backends: the backlog of the
	// retries is the sum over the processes. It grows with the retry rate
	// and the holds' delays, and is 0 once every letter sent to a hold was
	// released (a batch's retries are over).
	Holds []HoldStats
}

// HoldStats is one partition of a hold topic that a releaser of the
// backend claims (as a member of the consumer group "<hold topic>:release"),
// with the letters waiting there. Offsets are Kafka offsets, as in
// PartitionStats.
type HoldStats struct {
	// Topic is the hold topic's Kafka name, Partition the partition.
	Topic     string
	Partition int32
	// Committed is the group's committed offset as the claim began (-1
	// when it had none), then the offset after the last letter the
	// releaser released (or skipped, see SkippedHoldRecords), which it
	// marks for commit once the broker acknowledged its release: sarama's
	// offset manager commits it within Consumer.Offsets.AutoCommit.Interval
	// and when the claim ends.
	Committed int64
	// Next is the offset after the last record the releaser took from the
	// client (the letter it waits to release, or releases, included), or
	// where the claim started (-1 while not known).
	Next int64
	// HighWater is the partition's high-water mark as of the latest fetch
	// response, the log end the backend listed last (see
	// Options.HighWaterInterval) or the offset after the last letter this
	// backend held there, whichever is greatest; 0 before any: a releaser
	// does not fetch a partition while its next letter is not due, so the
	// letters other processes held there meanwhile count once listed.
	HighWater int64
	// Waiting is HighWater − Committed: the letters held in the partition
	// and not yet released, the one being released included; while the
	// group has no committed offset (a hold group starts at the oldest
	// record), HighWater − the offset of the first record the releaser
	// took, where the log starts (the records retention deleted do not
	// count), and the high-water mark itself before it took one. It is 0
	// while HighWater is unknown, and never negative.
	Waiting int64
}

// PartitionStats is one partition a group reader of the backend claims,
// or a broadcast reader reads, with its lag read the way the Kafka
// source's (package sources/kafka) is. Offsets are Kafka offsets: the
// offset of the next record to read, as Kafka commits them.
type PartitionStats struct {
	// Topic is the topic's Kafka name, Partition the partition.
	Topic     string
	Partition int32
	// Group is the reader's Kafka consumer group; empty for a broadcast
	// reader, which reads without one (a Kafka consumer group is never
	// named "").
	Group string
	// Committed is the group's committed offset as the claim began (-1
	// when it had none), then the end of the contiguous prefix of letters
	// the reader settled, which it marks for commit: sarama's offset
	// manager commits it within Consumer.Offsets.AutoCommit.Interval (1s
	// by default) and when the claim ends, and does not tell when the
	// broker accepted it, so Committed may run ahead of the broker's
	// offset by that interval. A broadcast reader commits nothing: its
	// Committed is its position, the offset of the next record it has
	// neither handed out (Receive, TryReceive) nor skipped (a record that
	// does not decode, or one for a group), the log end as of its
	// Subscribe before any.
	Committed int64
	// Next is the offset of the next record to fetch: the one after the
	// last record taken from the client, or where the claim (the
	// broadcast reader) started.
	Next int64
	// HighWater is the partition's high-water mark (the offset the next
	// produced record gets) as of the latest fetch response, or the log
	// end the backend listed last if greater (see
	// Options.HighWaterInterval): a reader whose buffer is full (a
	// handler that blocks) stops fetching, and the records produced
	// meanwhile count once listed. 0 before either.
	HighWater int64
	// Lag is HighWater − Committed: the records a restart would read
	// again or for the first time (a broadcast reader's: the records
	// published that it has not handed out yet, which a restart would not
	// deliver at all, a new broadcast reader starting at the log end);
	// while the group has no committed offset (a partition Declare could
	// not commit a start for), HighWater − the offset the claim started
	// at. FetchLag is HighWater − Next: the records not yet fetched. Both
	// are 0 while HighWater is unknown, and never negative.
	Lag      int64
	FetchLag int64
	// FetchErr is the error of the partition's last failed fetch while
	// its fetches fail (sarama.ErrTopicAuthorizationFailed, wrapped, for
	// a topic an ACL denies the reader READ on): HighWater then grows
	// with the topic only as the backend lists the log ends, which the
	// brokers may refuse too (DESCRIBE), or not answer. Nil once a fetch returns records, or once the fetches have
	// gone on without failing for the longer of 3 s and twice
	// Consumer.Retry.Backoff (sarama does not report a fetch that returns
	// nothing), and for a claim that has not failed. Not in the JSON
	// form.
	FetchErr error `json:"-"`
}

// Stall is a hold topic, or a partition of one, that its releaser cannot
// go on releasing. It lasts until the cause is gone: a fetch of the
// partition returns records again (for a fetch error that sarama retries,
// such as a hold topic deleted while its partitions were claimed: or 30
// seconds go by without the error, since sarama does not report a fetch
// that returns nothing), the letter is produced back, or a consumer group
// session of the hold topic starts; a partition the group moves to
// another member is no longer reported by this backend.
//
// While a stall lasts its releaser logs it once when it begins (at
// ERROR for a batch that cannot be decoded, at WARN otherwise), then
// again after FirstRepeatLog and at intervals that double up to
// MaxRepeatLog, with the count of failures so far; sarama's retries in
// between are not logged. It logs one INFO line when the stall ends.
type Stall struct {
	// Topic is the hold topic's Kafka name.
	Topic string
	// Partition is the stalled partition, or -1 when the releaser cannot
	// consume the hold topic at all (its consumer group sessions fail).
	Partition int32
	// Offset is the offset of the record the partition stopped at (for
	// a fetch, where the releaser's consumer fetches from), or -1 when
	// not known.
	Offset int64
	// Since is when the stall began.
	Since time.Time
	// Failures is the count of failed attempts since the stall began.
	Failures int
	// Err is the last failure; it wraps ErrReleaseStalled and the cause
	// (a *LetterTooLargeError naming the main topic's max.message.bytes
	// for a held letter larger than that topic takes).
	Err error
}

// Stats returns a snapshot of the backend's state. It is safe for
// concurrent use and sends no request to the cluster: it reads what the
// releasers and readers keep anyway (each one's lock for a moment, and the
// high-water marks of their latest fetches), and the log ends the backend
// listed last (see Options.HighWaterInterval).
func (b *Backend[T]) Stats() Stats {
	b.mu.Lock()
	rs := make([]*releaser[T], 0, len(b.releasers))
	for _, r := range b.releasers {
		rs = append(rs, r)
	}
	var prs []interface {
		appendPartitions([]PartitionStats) []PartitionStats
	}
	for c := range b.readers {
		switch r := c.(type) {
		case *groupReader[T]:
			prs = append(prs, r)
		case *broadcastReader[T]:
			prs = append(prs, r)
		}
	}
	b.mu.Unlock()
	st := Stats{SkippedHoldRecords: b.skippedHolds.Load()}
	for _, r := range rs {
		st.Stalled = r.stalls.appendTo(st.Stalled)
	}
	slices.SortFunc(st.Stalled, func(a, b Stall) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, r := range prs {
		st.Partitions = r.appendPartitions(st.Partitions)
	}
	sortPartitions(st.Partitions)
	for _, r := range rs {
		st.Holds = r.appendHolds(st.Holds)
	}
	slices.SortFunc(st.Holds, func(a, b HoldStats) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return st
}

// sortPartitions orders parts by group, topic and partition, and a
// partition of a group listed twice (two readers claim it for a moment of
// a rebalance) the one furthest ahead first: greatest Committed, then
// Next, then HighWater; a partition that broadcast readers (Group "")
// list more than once, each reading it all along, the one furthest behind
// first: least Committed, then Next, then HighWater. The order depends on
// the figures only, so a collector that keeps the first of each reads the
// same one whichever reader listed it first.
func sortPartitions(parts []PartitionStats) {
	slices.SortFunc(parts, func(a, b PartitionStats) int {
		if c := cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition)); c != 0 {
			return c
		}
		if a.Group == "" {
			a, b = b, a
		}
		return cmp.Or(cmp.Compare(b.Committed, a.Committed), cmp.Compare(b.Next, a.Next), cmp.Compare(b.HighWater, a.HighWater))
	})
}

// stallKind is what stalls a partition.
type stallKind uint8

const (
	stallSession stallKind = iota // the group sessions fail (partition -1)
	stallFetch                    // its fetches fail: a batch cannot be decoded
	stallRelease                  // a letter cannot be produced back
	stallRetried                  // its fetches fail with an error sarama retries
)

// retriedQuiet is how long after its last failure a partition stalled by
// fetch errors that sarama retries (stallRetried) is taken to fetch
// again: sarama reports nothing when a fetch succeeds without records, so
// such a stall ends with a record or with that quiet.
const retriedQuiet = 30 * time.Second

type stall struct {
	Stall
	kind stallKind
	gaps repeatlog.Gaps
	last time.Time // the last failure
}

// stalls are a releaser's stalled partitions, and the failures it logs at
// growing intervals that stall nothing (a fetch error sarama retries).
type stalls struct {
	topic string
	log   *slog.Logger
	red   redact.Secrets // taken out of the errors stalls keep
	n     atomic.Int32   // len(m): read on each record without the lock

	// others are the group's errors that stall nothing, by error text;
	// they end when a session starts.
	others repeatlog.Runs[string]

	mu sync.Mutex
	m  map[int32]*stall
}

// init sets the hold topic whose stalls s are, where they are logged, and
// the credentials taken out of their errors.
func (s *stalls) init(topic string, log *slog.Logger, red redact.Secrets) {
	s.topic, s.log, s.red = topic, log, red
	s.others.Log, s.others.Bound = log, repeatlog.MaxTexts
}

// appendTo appends the stalls to out.
func (s *stalls) appendTo(out []Stall) []Stall {
	quiet := time.Now().Add(-retriedQuiet)
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, st := range s.m {
		if st.kind == stallRetried && st.last.Before(quiet) {
			delete(s.m, p)
			s.n.Store(int32(len(s.m)))
			continue
		}
		out = append(out, st.Stall)
	}
	return out
}

// fail records a failed attempt of kind at partition part, offset at (-1:
// not known), and logs it when due (see Stall). A fetch error sarama
// retries, of a partition stalled otherwise, counts there and is not
// logged; any other failure of another kind begins a stall of its own.
func (s *stalls) fail(kind stallKind, part int32, at int64, err error) {
	now := time.Now()
	s.mu.Lock()
	st := s.m[part]
	if st != nil && (st.kind != kind && kind != stallRetried || st.kind == stallRetried && st.last.Before(now.Add(-retriedQuiet))) {
		st = nil // begins a stall of its own
	}
	begins := st == nil
	if begins {
		if s.m == nil {
			s.m = map[int32]*stall{}
		}
		st = &stall{Stall: Stall{Topic: s.topic, Partition: part, Offset: at, Since: now}, kind: kind}
		s.m[part] = st
		s.n.Store(int32(len(s.m)))
	} else if st.kind != kind {
		st.Failures++
		st.last = now
		s.mu.Unlock()
		return
	}
	st.Failures++
	st.last = now
	if at >= 0 {
		st.Offset = at
	}
	st.Err = fmt.Errorf("%w: %w", ErrReleaseStalled, s.red.Err(err))
	if !st.gaps.Due(now) {
		s.mu.Unlock()
		return
	}
	line := st.Stall
	s.mu.Unlock()
	level, msg := slog.LevelWarn, stallMessage(kind)
	if kind == stallFetch {
		level = slog.LevelError
	}
	if kind == stallRelease && errors.Is(err, ErrLetterTooLarge) {
		msg = msgReleaseTooLarge
	}
	attrs := []slog.Attr{slog.String("topic", line.Topic), slog.Int("partition", int(line.Partition)),
		slog.Int64("offset", line.Offset), slog.Any("error", err)}
	if !begins {
		attrs = append(attrs, slog.Time(repeatlog.SinceKey, line.Since), slog.Int(repeatlog.FailuresKey, line.Failures))
		msg += repeatlog.StillSuffix
	}
	s.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// msgReleaseTooLarge is the message of a stall whose held letter its main
// topic refuses as too large.
const msgReleaseTooLarge = "kafkatopology: a held letter is larger than its main topic takes; it waits in its hold partition, retried, until the topic's max.message.bytes is raised"

func stallMessage(kind stallKind) string {
	switch kind {
	case stallFetch:
		return "kafkatopology: hold partition fetch cannot be decoded; its letters wait there, not skipped, until it can"
	case stallRelease:
		return "kafkatopology: releasing a held letter to its main topic fails; retrying"
	case stallRetried:
		return "kafkatopology: hold partition fetch fails; retrying"
	default:
		return "kafkatopology: hold consumer group session fails; retrying"
	}
}

// fetched ends the stall of partition part by failed fetches, if any,
// when off, the offset of a record the partition delivered, is at or past
// the offset the fetches failed at (records fetched before that still
// come after the failure).
func (s *stalls) fetched(part int32, off int64) {
	if s.n.Load() == 0 {
		return
	}
	s.end(part, func(st *stall) bool {
		return (st.kind == stallFetch || st.kind == stallRetried) && off >= st.Offset
	})
}

// clear ends the stall of kind at partition part, if any.
func (s *stalls) clear(kind stallKind, part int32) {
	if s.n.Load() == 0 {
		return
	}
	s.end(part, func(st *stall) bool { return st.kind == kind })
}

// end ends the stall of partition part, if any and ok says so, with one
// INFO line.
func (s *stalls) end(part int32, ok func(*stall) bool) {
	s.mu.Lock()
	st := s.m[part]
	if st == nil || !ok(st) {
		s.mu.Unlock()
		return
	}
	delete(s.m, part)
	s.n.Store(int32(len(s.m)))
	s.mu.Unlock()
	s.log.Info("kafkatopology: hold partition released again", slog.String("topic", st.Topic),
		slog.Int("partition", int(st.Partition)), slog.Int64("offset", st.Offset),
		slog.Time(repeatlog.SinceKey, st.Since), slog.Int(repeatlog.FailuresKey, st.Failures))
}

// keepOnly drops the partition stalls but those of parts (the partitions
// of a new session; the others are another member's now), and ends the
// stall of the sessions, which have started again, and the runs of the
// group's other errors.
func (s *stalls) keepOnly(parts []int32) {
	s.clear(stallSession, -1)
	s.others.EndAll(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.m {
		if !slices.Contains(parts, p) {
			delete(s.m, p)
		}
	}
	s.n.Store(int32(len(s.m)))
}

// groupError handles an error of the releaser's consumer group (its
// Errors channel): a failed fetch stalls its partition at at(partition)
// (stallFetch for a batch that cannot be decoded, stallRetried for an
// error sarama retries); any other error is logged at WARN when due, per
// error text (repeatlog.Runs).
func (s *stalls) groupError(err error, at func(int32) int64) {
	var ce *sarama.ConsumerError
	if errors.As(err, &ce) && ce.Topic != "" {
		if kafkarefusal.SaramaCorrupt(ce.Err) {
			s.fail(stallFetch, ce.Partition, at(ce.Partition), corruptFetch(ce.Topic, ce.Partition, at(ce.Partition), ce.Err))
			return
		}
		s.fail(stallRetried, ce.Partition, at(ce.Partition), fmt.Errorf("fetching partition %q/%d: %w", ce.Topic, ce.Partition, ce.Err))
		return
	}
	s.others.Fail(context.Background(), err.Error(), repeatlog.Event{Level: slog.LevelWarn,
		Msg: "kafkatopology: hold consumer group error", Ended: "kafkatopology: hold consumer group error ended",
		Attrs: []slog.Attr{slog.String("topic", s.topic), slog.Any("error", err)}})
}

// holdEnds are, per hold partition, the offset after the last letter the
// backend held there: a releaser pauses the fetches of a partition while
// its next letter is not due, so the high-water mark of its latest fetch
// leaves out the letters held since.
type holdEnds struct {
	mu sync.Mutex
	m  map[topicPartition]int64
}

// topicPartition is a partition of a topic.
type topicPartition = kafkaends.Partition

// wrote records that the backend held a letter in partition part of hold
// topic topic, which ends at end now.
func (h *holdEnds) wrote(topic string, part int32, end int64) {
	k := topicPartition{Topic: topic, Part: part}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[topicPartition]int64{}
	}
	h.m[k] = max(h.m[k], end)
}

// end returns the offset after the last letter the backend held in
// partition part of hold topic topic, 0 if none.
func (h *holdEnds) end(topic string, part int32) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[topicPartition{Topic: topic, Part: part}]
}
