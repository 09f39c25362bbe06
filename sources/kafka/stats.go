package kafka

import (
	"cmp"
	"slices"
)

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
	// last record taken from sarama, or where the claim started; -1 until
	// the first record when the claim started at the oldest or newest
	// record without knowing its offset.
	Next int64
	// HighWater is the partition's high-water mark (the offset the next
	// produced record gets) as of the latest fetch response; 0 before the
	// first.
	HighWater int64
	// Lag is HighWater − Committed: the records a restart would read
	// again or for the first time. FetchLag is HighWater − Next: the
	// records not yet fetched. Both are 0 while HighWater (or Next) is
	// unknown, and never negative.
	Lag      int64
	FetchLag int64
	// InFlight counts the records delivered to the pipeline whose
	// outcome has not reached the claim (or that wait behind one that has
	// not); ReadAhead the records taken from sarama and not yet delivered.
	InFlight  int
	ReadAhead int
}

// Stats returns a snapshot of the source's members and their claimed
// partitions. It is safe for concurrent use, reads counters the source
// keeps anyway (atomics, and each claim's lock for a moment), and costs
// nothing when not called: poll it as often as once a second.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	ms := make([]*member, 0, len(s.members))
	for m := range s.members {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	st := Stats{GroupID: s.opts.GroupID, Members: make([]MemberStats, 0, len(ms))}
	for _, m := range ms {
		st.Members = append(st.Members, m.stats())
	}
	slices.SortFunc(st.Members, func(a, b MemberStats) int { return cmp.Compare(a.Stage, b.Stage) })
	return st
}

func (m *member) stats() MemberStats {
	ms := MemberStats{
		Stage:           m.stage.Name(),
		GenerationID:    -1,
		Commits:         m.commits.Load(),
		CommitErrors:    m.commitErrors.Load(),
		LastCommitError: m.lastCommitErr.Load(),
	}
	m.claimsMu.Lock()
	if m.sess != nil {
		ms.MemberID, ms.GenerationID = m.sess.MemberID(), m.sess.GenerationID()
	}
	ms.Rebalances = m.rebalances
	ps := make([]*partition, 0, len(m.claims))
	for p := range m.claims {
		ps = append(ps, p)
	}
	m.claimsMu.Unlock()
	ms.Partitions = make([]PartitionStats, 0, len(ps))
	for _, p := range ps {
		ms.Partitions = append(ms.Partitions, p.stats())
	}
	slices.SortFunc(ms.Partitions, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return ms
}

func (p *partition) stats() PartitionStats {
	ps := PartitionStats{
		Topic:        p.topic,
		Partition:    p.part,
		GenerationID: p.generation,
		Committed:    p.committed.Load(),
		Marked:       p.marked.Load(),
		Next:         p.next.Load(),
		ReadAhead:    int(p.readAhead.Load()),
	}
	if p.claimPC != nil {
		ps.HighWater = p.claimPC.HighWaterMarkOffset()
	}
	if own := p.ownPC.Load(); own != nil {
		ps.HighWater = max(ps.HighWater, own.pc.HighWaterMarkOffset())
	}
	if ps.HighWater > 0 {
		ps.Lag = max(0, ps.HighWater-max(0, ps.Committed))
		if ps.Next >= 0 {
			ps.FetchLag = max(0, ps.HighWater-ps.Next)
		}
	}
	p.mu.Lock()
	ps.InFlight = p.cp.Pending()
	p.mu.Unlock()
	return ps
}
