package kafka

import (
	"errors"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// CommitError is the last commit of a member the broker did not accept
// (MemberStats.LastCommitError): Err, the error; At, when it happened; and
// Partitions, the partitions ("topic/partition") whose offsets it left
// uncommitted. The offsets stay marked and go out with the next commit. It
// unwraps to Err.
type CommitError = claim.CommitError

// commitLoop commits on the interval, and on every advance with
// CommitOnAck, until the member's sessions are over (each claim commits on
// its release itself).
func (m *member) commitLoop() {
	m.cm.CommitLoop(m.opts.CommitInterval, m.loopDone, func() { _ = m.commit(nil) }) // recorded and logged
}

// commit sends, in one OffsetCommit request, the handled offsets of the
// member's claims that differ from what they last committed (only p's
// when only is not nil), and records what the broker accepted. Commits of
// a member are serialised: at most one request is in flight per member,
// hence per partition.
func (m *member) commit(only *partition) error {
	var c *claim.Claim
	if only != nil {
		c = only.Claim
	}
	return m.cm.Commit(c, m.send)
}

// send is the member's claim.Send: one OffsetCommit request through the
// group's coordinator.
func (m *member) send(blocks []claim.Block) ([]claim.Block, error) {
	// One session's generation and member id per request: claims of an
	// older session (there are none once it has ended) wait for the next.
	sess := blocks[0].C.Session.(sarama.ConsumerGroupSession)
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
		if b.C.Session == any(sess) {
			req.AddBlockWithLeaderEpoch(b.C.Topic, b.C.Part, b.Off, -1, ts, "")
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
		m.refreshCoordinator(err)
		return blocks, flat(err)
	}
	for i := range blocks {
		b := &blocks[i]
		kerr, ok := resp.Errors[b.C.Topic][b.C.Part]
		switch {
		case !ok:
			b.Err = sarama.ErrIncompleteResponse
		case kerr != sarama.ErrNoError:
			b.Err = kerr
			m.refreshCoordinator(kerr)
		}
	}
	return blocks, nil
}

// refreshCoordinator asks sarama to find the group's coordinator again
// when err says it moved.
func (m *member) refreshCoordinator(err error) {
	if errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) {
		_ = m.client.RefreshCoordinator(m.opts.GroupID)
	}
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
var commitVersion = kafkaoffset.CommitVersion
