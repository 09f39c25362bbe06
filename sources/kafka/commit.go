package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// CommitError is the last commit of a member the broker did not accept
// (MemberStats.LastCommitError): the error, when it happened, and the
// partitions whose offsets it left uncommitted. The offsets stay marked and
// go out with the next commit.
type CommitError struct {
	Err        error
	At         time.Time
	Partitions []string // "topic/partition"
}

func (e *CommitError) Error() string {
	return fmt.Sprintf("kafka: commit of %d partition(s) failed: %v", len(e.Partitions), e.Err)
}

func (e *CommitError) Unwrap() error { return e.Err }

// commitBlock is one partition's offset in a commit request.
type commitBlock struct {
	p   *partition
	off int64
}

// commitLoop commits on the interval, and on every advance with
// CommitOnAck, until the member's sessions are over (each claim commits on
// its release itself).
func (m *member) commitLoop() {
	t := time.NewTicker(m.opts.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.commitWake:
		case <-m.loopDone:
			return
		}
		_ = m.commit(nil) // recorded and logged
	}
}

// commit sends, in one OffsetCommit request, the handled offsets of the
// member's claims that differ from what they last committed (only p's
// when only is not nil), and records what the broker accepted. Commits of
// a member are serialised: at most one request is in flight per member,
// hence per partition.
func (m *member) commit(only *partition) error {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	blocks := m.commitBuf[:0]
	add := func(p *partition) {
		if off := p.marked.Load(); off >= 0 && off != p.committed.Load() {
			blocks = append(blocks, commitBlock{p, off})
		}
	}
	if only != nil {
		add(only)
	} else {
		m.claimsMu.Lock()
		for p := range m.claims {
			add(p)
		}
		m.claimsMu.Unlock()
	}
	defer func() {
		all := blocks[:cap(blocks)] // also the blocks of another session dropped below
		clear(all)
		m.commitBuf = all[:0]
	}()
	if len(blocks) == 0 {
		return nil
	}
	// One session's generation and member id per request: claims of an
	// older session (there are none once it has ended) wait for the next.
	sess := blocks[0].p.sess
	req := &sarama.OffsetCommitRequest{
		Version:                 m.commitVersion,
		ConsumerGroup:           m.opts.GroupID,
		ConsumerGroupGeneration: sess.GenerationID(),
		ConsumerID:              sess.MemberID(),
		RetentionTime:           -1,
	}
	if r := m.client.Config().Consumer.Offsets.Retention; r > 0 && req.Version >= 2 && req.Version < 5 {
		req.RetentionTime = r.Milliseconds()
	}
	if id := m.client.Config().Consumer.Group.InstanceId; id != "" && req.Version >= 7 {
		req.GroupInstanceId = &id
	}
	var ts int64
	if req.Version == 1 {
		ts = sarama.ReceiveTime
	}
	n := 0
	for _, b := range blocks {
		if b.p.sess == sess {
			req.AddBlockWithLeaderEpoch(b.p.topic, b.p.part, b.off, -1, ts, "")
			blocks[n] = b
			n++
		}
	}
	blocks = blocks[:n]

	coord, err := m.client.Coordinator(m.opts.GroupID)
	var resp *sarama.OffsetCommitResponse
	if err == nil {
		resp, err = coord.CommitOffset(req)
		if err != nil {
			// The connection is broken: the client opens it again.
			_ = coord.Close()
		}
	}
	if err != nil {
		return m.commitFailed(err, blocks)
	}
	var failed []commitBlock
	var ferr error
	for _, b := range blocks {
		kerr, ok := resp.Errors[b.p.topic][b.p.part]
		if ok && kerr == sarama.ErrNoError {
			b.p.committed.Store(b.off)
			continue
		}
		failed = append(failed, b)
		ferr = sarama.ErrIncompleteResponse
		if ok {
			ferr = kerr
		}
	}
	m.commits.Add(1)
	if len(failed) > 0 {
		return m.commitFailed(ferr, failed)
	}
	return nil
}

// commitFailed records and logs a commit the broker did not accept, and
// returns the error. The caller holds commitMu.
func (m *member) commitFailed(err error, blocks []commitBlock) *CommitError {
	if errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) {
		_ = m.client.RefreshCoordinator(m.opts.GroupID)
	}
	parts := make([]string, len(blocks))
	for i, b := range blocks {
		parts[i] = b.p.key
	}
	ce := &CommitError{Err: flat(err), At: time.Now(), Partitions: parts}
	m.lastCommitErr.Store(ce)
	m.commitErrors.Add(1)
	m.log.Warn("kafka commit failed; the offsets go out with the next commit",
		slog.Any("partitions", parts), slog.Any("error", ce.Err))
	return ce
}

// commitFinal commits p's handled offsets on its release, retrying up to
// Config.Consumer.Offsets.Retry.Max times (as sarama's final flush does)
// unless the group has moved on (the member's generation is over).
func (m *member) commitFinal(p *partition) {
	for range m.client.Config().Consumer.Offsets.Retry.Max + 1 {
		err := m.commit(p)
		if err == nil || errors.Is(err, sarama.ErrIllegalGeneration) || errors.Is(err, sarama.ErrUnknownMemberId) ||
			errors.Is(err, sarama.ErrRebalanceInProgress) || errors.Is(err, sarama.ErrClosedClient) {
			return
		}
	}
}

// commitVersion is the OffsetCommit version sarama's own offset manager
// would send for the configured protocol version.
func commitVersion(v sarama.KafkaVersion) int16 {
	switch {
	case v.IsAtLeast(sarama.V2_4_0_0):
		return 8
	case v.IsAtLeast(sarama.V2_3_0_0):
		return 7
	case v.IsAtLeast(sarama.V2_1_0_0):
		return 6
	case v.IsAtLeast(sarama.V2_0_0_0):
		return 4
	case v.IsAtLeast(sarama.V0_11_0_0):
		return 3
	case v.IsAtLeast(sarama.V0_9_0_0):
		return 2
	}
	return 1
}

// lastCommitErr holds a *CommitError.
type lastCommitErr = atomic.Pointer[CommitError]
