package kafkatopic

import (
	"cmp"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaends"
	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/topic"
)

// highWater is what a sarama group claim or partition consumer offers to
// read its partition's high-water mark (from its latest fetch response,
// atomically).
type highWater interface{ HighWaterMarkOffset() int64 }

// claimFigures are what a member keeps of a claim for its figures.
type claimFigures struct {
	// committed is the group's committed offset as the claim began, -1
	// when it had none; start is where the claim started: the log start
	// as the claim began when it had none, or, when that was not had
	// (kafkaoffset.StartOldest), the offset of the first record the
	// claim fetches; and the first record's offset when it is higher (the
	// records below it were deleted since the claim began).
	committed, start int64
	hw               highWater // the claim's consumer
	fetched          bool      // whether the claim fetched a record
}

// fetchErr is the error of a partition's last failed fetch, at at; the
// zero fetchErr is none.
type fetchErr struct {
	err error
	at  time.Time
}

// current returns the error while it is younger than the longer of
// kafkareach.HeardQuiet and twice cfg's Consumer.Retry.Backoff, nil
// after: sarama does not report a fetch that returns nothing.
func (f fetchErr) current(cfg *sarama.Config) error {
	if f.err != nil && time.Since(f.at) < max(kafkareach.HeardQuiet, 2*cfg.Consumer.Retry.Backoff) {
		return f.err
	}
	return nil
}

// fetched records off, the offset of a record claim c fetched, as where
// the claim started when it is the claim's first and lies past where the
// claim started (or the claim started at the oldest record without
// knowing its offset): the records below it were deleted, and its lag
// counts from there. m.mu is held.
func (m *member[T]) fetched(c *kafkaoffset.Claim, off int64) {
	if f, ok := m.claims[c]; ok && !f.fetched {
		f.fetched = true
		if f.start == kafkaoffset.StartOldest || off > f.start {
			f.start = off
		}
		m.claims[c] = f
	}
}

// fetchFailed records err, a failed fetch of partition part.
func (m *member[T]) fetchFailed(part int32, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fetchErrs[part] = fetchErr{err: err, at: time.Now()}
}

// appendPartitions appends the figures of the partitions the member
// claims to out.
func (m *member[T]) appendPartitions(out []topic.PartitionStats) []topic.PartitionStats {
	b := m.t.b
	m.mu.Lock()
	defer m.mu.Unlock()
	for c, f := range m.claims {
		committed := f.committed
		if mk := c.Marked(); mk >= 0 {
			committed = mk
		}
		hw := max(f.hw.HighWaterMarkOffset(), b.ends.End(m.t.kname, c.Partition()))
		lag, _ := kafkaoffset.Lag(hw, committed, f.start, -1)
		out = append(out, topic.PartitionStats{Group: m.gid, Partition: c.Partition(), Committed: committed,
			HighWater: hw, Lag: lag, FetchErr: m.fetchErrs[c.Partition()].current(b.cfg)})
	}
	return out
}

// appendRead appends the partitions the member claims to out.
func (m *member[T]) appendRead(out []kafkaends.Partition) []kafkaends.Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.claims {
		out = append(out, kafkaends.Partition{Topic: m.t.kname, Part: c.Partition()})
	}
	return out
}

// skipped records the record of partition part at off, which the
// subscriber skipped: its position moves past it, once the records of
// the partition fetched before it that wait are handed out.
func (s *bsub[T]) skipped(part int32, off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[part]; p != nil {
		p.fetchErr = fetchErr{}
		if p.queued == 0 {
			p.pos = max(p.pos, off+1)
		} else {
			p.skipped = off + 1
		}
	}
}

// fetchFailed records err, a failed fetch of partition part.
func (s *bsub[T]) fetchFailed(part int32, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[part]; p != nil {
		p.fetchErr = fetchErr{err: err, at: time.Now()}
	}
}

// appendPartitions appends the figures of the partitions the subscriber
// reads to out.
func (s *bsub[T]) appendPartitions(out []topic.PartitionStats) []topic.PartitionStats {
	b := s.t.b
	s.mu.Lock()
	defer s.mu.Unlock()
	for part, p := range s.parts {
		hw := max(p.hw.HighWaterMarkOffset(), b.ends.End(s.t.kname, part))
		lag, _ := kafkaoffset.Lag(hw, p.pos, p.pos, -1)
		out = append(out, topic.PartitionStats{Partition: part, Committed: p.pos, HighWater: hw, Lag: lag,
			FetchErr: p.fetchErr.current(b.cfg)})
	}
	return out
}

// appendRead appends the partitions the subscriber reads to out.
func (s *bsub[T]) appendRead(out []kafkaends.Partition) []kafkaends.Partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	for part := range s.parts {
		out = append(out, kafkaends.Partition{Topic: s.t.kname, Part: part})
	}
	return out
}

// readers returns the topic's balanced members and broadcast subscribers.
func (t *kTopic[T]) readers() ([]*member[T], []*bsub[T]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := make([]*member[T], 0, len(t.members))
	for m := range t.members {
		ms = append(ms, m)
	}
	bs := make([]*bsub[T], 0, len(t.broadcasts))
	for s := range t.broadcasts {
		bs = append(bs, s)
	}
	return ms, bs
}

// partitions returns the figures of the partitions the topic's members
// claim and its broadcast subscribers read, ordered as
// topic.StateStats.Partitions says.
func (t *kTopic[T]) partitions() []topic.PartitionStats {
	ms, bs := t.readers()
	var out []topic.PartitionStats
	for _, s := range bs {
		out = s.appendPartitions(out)
	}
	for _, m := range ms {
		out = m.appendPartitions(out)
	}
	sortPartitions(out)
	return out
}

// sortPartitions orders parts by group and partition, and a partition of
// a group listed twice (two members claim it for a moment of a
// rebalance) the one furthest ahead first: greatest Committed, then
// HighWater, as the group's committed offset only moves forward; a
// partition that broadcast subscribers (Group "") list more than once,
// each reading it all along, the one furthest behind first: least
// Committed, then HighWater. Of readers tied on the figures, the one
// whose fetches fail comes first. The order depends on the figures only,
// so a collector that keeps the first of each reads the same one
// whichever reader listed it first.
func sortPartitions(parts []topic.PartitionStats) {
	failing := func(p topic.PartitionStats) int {
		if p.FetchErr != nil {
			return 0
		}
		return 1
	}
	slices.SortFunc(parts, func(a, b topic.PartitionStats) int {
		if c := cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Partition, b.Partition)); c != 0 {
			return c
		}
		ahead, behind := a, b // furthest ahead first
		if a.Group == "" {
			ahead, behind = b, a
		}
		return cmp.Or(cmp.Compare(behind.Committed, ahead.Committed), cmp.Compare(behind.HighWater, ahead.HighWater),
			cmp.Compare(failing(a), failing(b)))
	})
}

// listEnds lists the log ends of the partitions the backend's members
// claim and its broadcast subscribers read every
// Options.HighWaterInterval until stop is closed (kafkaends.Lister): the
// topics' Stats take a partition's high-water mark as the greater of the
// end listed last and its latest fetch's, since a consumer whose
// read-ahead is full does not fetch, and learns of no record published
// meanwhile. The listing's requests go out on connections of its own
// within the backend's, each listing cut short after kafkaends.Timeout or
// once Close has closed the topics (stop), so a cluster that does not
// answer holds neither the listing nor Close.
func (b *Backend[T]) listEnds(stop <-chan struct{}) {
	l := &kafkaends.Lister{Client: b.client, Conns: b.conns, Log: b.log, Clean: b.red.Err, Lines: kafkaends.ReaderLines("kafkatopic: ")}
	l.Run(&b.ends, b.opts.HighWaterInterval, b.readPartitions, stop)
}

// readPartitions returns the partitions the backend's members claim and
// its broadcast subscribers read, each once.
func (b *Backend[T]) readPartitions() []kafkaends.Partition {
	b.mu.Lock()
	ts := make([]*kTopic[T], 0, len(b.topics))
	for t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.Unlock()
	var read []kafkaends.Partition
	for _, t := range ts {
		ms, bs := t.readers()
		for _, m := range ms {
			read = m.appendRead(read)
		}
		for _, s := range bs {
			read = s.appendRead(read)
		}
	}
	slices.SortFunc(read, func(a, b kafkaends.Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Part, b.Part))
	})
	return slices.Compact(read)
}
