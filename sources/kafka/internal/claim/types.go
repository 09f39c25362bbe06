// Package claim is what the Kafka sources share, whichever client they read
// with (sarama in package kafka, franz-go in package franz): one claimed
// partition's state (permits, read-ahead, contiguous handled prefix, failure
// policy, slots, withdrawal, release), a member's claims and commit
// bookkeeping, the record metadata, the stats types and the option rules.
// A source adds only what talks to its client: fetching, pausing,
// rewinding, committing and joining the group.
package claim

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Metadata is what a handler learns about a Kafka record: every message a
// Kafka source delivers carries a *Metadata, read with
// message.MetadataAs[*kafka.Metadata](m) (or *franz.Metadata, the same
// type).
type Metadata struct {
	// Topic and Partition say where the record was read.
	Topic     string
	Partition int32
	// Offset is the record's offset in its partition.
	Offset int64
	// Key is the record key (nil when the record has none).
	Key []byte
	// Headers are the record headers, in the order the producer set them.
	Headers []Header
	// Timestamp is the record's timestamp (create or log-append time, as the
	// topic is configured).
	Timestamp time.Time
	// GenerationID is the consumer-group generation in which the partition
	// was claimed when the record was fetched.
	GenerationID int32
	// MemberID is the group member that fetched the record.
	MemberID string
	// Group is the consumer group the member belongs to (Options.GroupID).
	Group string
}

// Header is one record header.
type Header struct {
	Key   []byte
	Value []byte
}

// LogValue describes the record for logs by where it was read: its topic,
// partition and offset (not its key, which may be binary or personal
// data). The pipeline's failure lines carry it (message.Message.LogValue).
func (md *Metadata) LogValue() slog.Value {
	if md == nil {
		return slog.Value{}
	}
	return slog.GroupValue(slog.String("topic", md.Topic), slog.Int("partition", int(md.Partition)),
		slog.Int64("offset", md.Offset))
}

// Header returns the value of the first header named key, and whether there
// is one.
func (md *Metadata) Header(key string) ([]byte, bool) {
	for _, h := range md.Headers {
		if string(h.Key) == key {
			return h.Value, true
		}
	}
	return nil, false
}

// FailurePolicy says what a failed message with acker.DispositionDefault does
// to its partition's committed offset.
type FailurePolicy string

const (
	// FailureCommit treats a failed message as done once the processor's
	// HandleFailed hook (or the batcher's) has run: the offset is committed
	// past it, so a poison message never stalls its partition. This is
	// BroadwayKafka's behaviour. It is the default.
	FailureCommit FailurePolicy = "commit"
	// FailureRedeliver stops the partition at the failed message: the
	// committed offset does not pass it, the partition's messages after it
	// are no longer dispatched, and after RedeliveryBackoff the partition is
	// fetched again from the failed message on.
	FailureRedeliver FailurePolicy = "redeliver"
)

// CommitError is the last commit of a member the broker did not accept
// (MemberStats.LastCommitError): the error, when it happened, and the
// partitions whose offsets it left uncommitted. The offsets stay marked and
// go out with the next commit.
type CommitError struct {
	Err        error
	At         time.Time
	Partitions []string // "topic/partition", ordered by topic and partition
}

// Error names how many partitions the commit left uncommitted, and why.
func (e *CommitError) Error() string {
	return fmt.Sprintf("kafka: commit of %d partition(s) failed: %v", len(e.Partitions), e.Err)
}

// Unwrap returns the commit's error.
func (e *CommitError) Unwrap() error { return e.Err }

// commitErrorJSON is a CommitError as JSON: Err as its message.
type commitErrorJSON struct {
	Err        string
	At         time.Time
	Partitions []string
}

// MarshalJSON encodes e with Err as its message ("" when nil), so that a
// snapshot in JSON (observe's /stats) says why the commit failed: the
// error values of most types encode as an empty object, and some cannot
// be encoded at all.
func (e *CommitError) MarshalJSON() ([]byte, error) {
	j := commitErrorJSON{At: e.At, Partitions: e.Partitions}
	if e.Err != nil {
		j.Err = e.Err.Error()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes: Err is an error with
// the message only (nil when it is "").
func (e *CommitError) UnmarshalJSON(b []byte) error {
	var j commitErrorJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = CommitError{At: j.At, Partitions: j.Partitions}
	if j.Err != "" {
		e.Err = errors.New(j.Err)
	}
	return nil
}

// Stats is a snapshot of a source's runtime state (Source.Stats): one
// MemberStats per consumer-group member, that is per producer stage that
// runs the source.
type Stats struct {
	// GroupID is the consumer group.
	GroupID string
	// Members are the source's group members, ordered by stage name.
	Members []MemberStats
}

// MemberStats is one consumer-group member (one producer stage).
type MemberStats struct {
	// Stage is the name of the producer stage the member runs in.
	Stage string
	// MemberID is the member id the group coordinator gave it, and
	// GenerationID the group generation of its latest session; "" and -1
	// before it first joined.
	MemberID     string
	GenerationID int32
	// Rebalances counts the group generations the member has taken part
	// in: the sessions it started, and, with a cooperative strategy, each
	// new generation in which it claimed a partition.
	Rebalances int64
	// Commits counts the OffsetCommit requests the broker answered;
	// CommitErrors the commits it did not accept (or that could not be
	// sent), and LastCommitError is the latest of them (nil when none).
	Commits         int64
	CommitErrors    int64
	LastCommitError *CommitError
	// Partitions are the partitions the member currently claims, ordered
	// by topic and partition.
	Partitions []PartitionStats
}

// PartitionStats is one claimed partition. Offsets are Kafka offsets: the
// offset of the next record to read, as Kafka commits them.
type PartitionStats struct {
	Topic     string
	Partition int32
	// GenerationID is the group generation in which it was claimed.
	GenerationID int32
	// Committed is the offset the broker last accepted for the group
	// (what the claim started with, or what it committed since); -1 when
	// the group has none.
	Committed int64
	// Marked is the end of the handled prefix: the offset the next commit
	// sends (equal to Committed when there is nothing to commit).
	Marked int64
	// Next is the offset of the next record to fetch: the one after the
	// last record taken from the client, or where the claim started; -1
	// until the first record when the claim started at the oldest or
	// newest record without knowing its offset.
	Next int64
	// HighWater is the partition's high-water mark (the offset the next
	// produced record gets), or for a reader of committed records the end
	// it reads up to, its last stable offset (the records of a transaction
	// still open are not readable yet): the latest fetch response's (for a
	// reader of committed records whose client tells no last stable
	// offset, the offset after the last record fetched), or the end offset
	// the member last listed when higher (Claim.NoteHighWater); 0 before
	// the first of either.
	HighWater int64
	// Lag is HighWater − Committed: the records a restart would read
	// again or for the first time; while the group has no committed
	// offset, HighWater − the offset the claim started at (the first
	// record it took, when it started at the oldest or newest record
	// without knowing its offset). FetchLag is HighWater − Next: the
	// records not yet fetched. Each is 0 while an offset it needs is
	// unknown, HighWater included, and never negative; a claim that
	// starts at the oldest record counts the whole log as lag until it
	// takes its first record (the log's start is not known before).
	Lag      int64
	FetchLag int64
	// InFlight counts the records delivered to the pipeline whose
	// outcome has not reached the claim (or that wait behind one that has
	// not); ReadAhead the records taken from the client and not yet
	// delivered.
	InFlight  int
	ReadAhead int
	// FailedCommitted counts the failed messages with DispositionDefault
	// that the claim committed past under FailureCommit, each once the
	// offset the claim marks for commit passed it: they are not delivered
	// again. Messages a hook discarded (DispositionDiscard) are not
	// counted. It starts at 0 with each claim.
	FailedCommitted int64
}
