package kafka

import "github.com/boulevard-go/boulevard/sources/kafka/internal/claim"

// Stats is a snapshot of a source's runtime state (Source.Stats): GroupID,
// the consumer group, and Members, one MemberStats per consumer-group
// member (that is per producer stage that runs the source), ordered by
// stage name. The franz-go source reports the same type.
type Stats = claim.Stats

// MemberStats is one consumer-group member (one producer stage):
//   - Stage, the name of the producer stage the member runs in;
//   - MemberID and GenerationID, the member id the group coordinator gave
//     it and the group generation of its latest session ("" and -1 before
//     it first joined);
//   - Rebalances, the group generations it has taken part in (the
//     sessions it started, and, with a cooperative strategy, each new
//     generation in which it claimed a partition);
//   - Commits, the OffsetCommit requests the broker answered;
//     CommitErrors, the commits it did not accept (or that could not be
//     sent); LastCommitError, the latest of them (nil when none);
//   - Partitions, the partitions it currently claims, ordered by topic and
//     partition.
//
// Rebalances, Commits and CommitErrors are the stage's totals for the
// source's life: when a member fails and the stage's Run starts a new one,
// they go on from those of the member gone (so does LastCommitError, until
// the new member has one of its own), rather than from 0.
type MemberStats = claim.MemberStats

// PartitionStats is one claimed partition. Offsets are Kafka offsets: the
// offset of the next record to read, as Kafka commits them.
//   - Topic, Partition, and GenerationID, the group generation in which it
//     was claimed;
//   - Committed, the offset the broker last accepted for the group (what
//     the claim started with, or what it committed since), -1 when the
//     group has none;
//   - Marked, the end of the handled prefix: the offset the next commit
//     sends (equal to Committed when there is nothing to commit);
//   - Next, the offset of the next record to fetch (the one after the last
//     record taken from the client, or where the claim started), -1 until
//     the first record when the claim started at the oldest or newest
//     record without knowing its offset;
//   - HighWater, the partition's high-water mark: the latest fetch
//     response's, or the end offset listed every Options.HighWaterInterval
//     when higher, 0 before the first of either. Under read-committed
//     (Config.Consumer.IsolationLevel sarama.ReadCommitted) it is the end
//     the reader reads up to instead: the listed last stable offset, or
//     the offset after the last record fetched when higher, as the
//     fetched high-water mark counts the records of transactions still
//     open;
//   - Lag, HighWater − Committed (the records a restart would read again
//     or for the first time; while the group has no committed offset,
//     HighWater − the offset the claim started at, or the first record it
//     took when it started at the oldest or newest without knowing the
//     offset), and FetchLag, HighWater − Next (the records not yet
//     fetched); each 0 while an offset it needs is unknown, HighWater
//     included, and never negative, except that a claim that starts at
//     the oldest record counts the whole log as lag until it takes its
//     first record;
//   - InFlight, the records delivered to the pipeline whose outcome has
//     not reached the claim (or that wait behind one that has not), and
//     ReadAhead, the records taken from the client and not yet delivered;
//   - FailedCommitted, the failed messages with DispositionDefault the
//     claim committed past under FailurePolicy commit, counted once the
//     offset the claim marks for commit passes them: they are not
//     delivered again (a hook that dead-letters a message sets
//     DispositionDiscard, which is not counted); 0 when each claim starts.
type PartitionStats = claim.PartitionStats

// Stats returns a snapshot of the source's members and their claimed
// partitions. It is safe for concurrent use, reads counters the source
// keeps anyway (atomics, and each claim's lock for a moment), and costs
// nothing when not called: poll it as often as once a second. A Source New
// did not make has no member.
func (s *Source) Stats() Stats {
	if s == nil {
		return claim.SourceStats("", []MemberStats{})
	}
	return s.live.Stats(s.opts.GroupID)
}
