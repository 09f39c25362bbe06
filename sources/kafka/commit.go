package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// CommitError is the last commit of a member the broker did not accept
// (MemberStats.LastCommitError): Err, the error; At, when it happened; and
// Partitions, the partitions ("topic/partition", ordered by topic and
// partition) whose offsets it left uncommitted, all of them (its log line
// names the first 32 and counts them all). The offsets stay marked and go
// out with the next commit. It unwraps to Err. In JSON (observe's /stats)
// Err is its message; decoded from JSON, Err is an error with that message
// only.
type CommitError = claim.CommitError

// commitLoop commits on the interval, and on every advance with
// CommitOnAck, until the member's sessions are over (each claim commits on
// its release itself). Each of these commits ends after RevokeTimeout.
func (m *member) commitLoop() {
	m.cm.CommitLoop(m.opts.CommitInterval, m.loopDone, func() {
		ctx, cancel := context.WithTimeout(m.hurryCtx, m.opts.RevokeTimeout)
		defer cancel()
		_ = m.commit(ctx, nil) // recorded and logged
	})
}

// commit sends, in one OffsetCommit request, the handled offsets of the
// member's claims that differ from what they last committed (only p's
// when only is not nil), and records what the broker accepted. Commits of
// a member are serialised: at most one request is in flight per member,
// hence per partition. It returns by ctx's end (claim.Member.Commit).
func (m *member) commit(ctx context.Context, only *partition) error {
	var c *claim.Claim
	if only != nil {
		c = only.Claim
	}
	return m.cm.Commit(ctx, c, m.send)
}

// send is the member's claim.Send: one OffsetCommit request to the group's
// coordinator, on the member's commit connection (commitConn). It returns
// by ctx's end: the request then goes on in a goroutine of the member until
// it is answered (or fails: sarama's Net.ReadTimeout, the member's Close),
// its answer is dropped, and the member's next request waits for it.
func (m *member) send(ctx context.Context, blocks []claim.Block) ([]claim.Block, error) {
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

	answer := make(chan commitAnswer, 1)
	m.wg.Go(func() { m.commitConn.send(ctx, m, req, answer) })
	var a commitAnswer
	select {
	case a = <-answer:
	case <-ctx.Done():
		// Abandoned: what the broker makes of the request is not
		// recorded. The offsets it carried were handled, so the broker
		// applying it skips nothing; it stays on the commit connection,
		// ahead of the member's later commits, so it cannot move back
		// an offset they commit; and the broker refuses it once the
		// group has moved to a new generation, so it cannot move back
		// the offset a later owner commits.
		return blocks, fmt.Errorf("kafka: commit abandoned: %w", context.Cause(ctx))
	}
	if a.err != nil {
		return blocks, flat(a.err)
	}
	for i := range blocks {
		b := &blocks[i]
		kerr, ok := a.resp.Errors[b.C.Topic][b.C.Part]
		switch {
		case !ok:
			b.Err = sarama.ErrIncompleteResponse
		case kerr != sarama.ErrNoError:
			b.Err = kerr
		}
	}
	return blocks, nil
}

// commitAnswer is what an OffsetCommit request got.
type commitAnswer struct {
	resp *sarama.OffsetCommitResponse
	err  error
}

// commitConn is the member's own connection to its group's coordinator,
// which its OffsetCommit requests use one at a time. sarama waits for an
// answer holding the broker's lock, so a commit on the client's connection
// to the coordinator, which the group's heartbeats and joins use, would
// hold them as long as the cluster leaves it unanswered; on a connection of
// its own, it holds only the member's later commits.
//
// A request whose commit was abandoned keeps the connection until it is
// answered or fails (sarama's Net.ReadTimeout, or cut, once the member's
// commits are over): the broker handles a connection's requests in order,
// whereas a request cut short may still be applied after one sent on
// another connection, which would move the offset back.
type commitConn struct {
	sem   chan struct{}  // held by the request on its way
	all   *kafkaconn.Set // every connection of the member's commits, a child of the member's set
	b     *sarama.Broker // nil until opened, and once its connection failed
	conns *kafkaconn.Set // b's connection, a child of all
}

// newCommitConn returns the commit connection of a member whose client
// dials through conns as cfg says.
func newCommitConn(conns *kafkaconn.Set, cfg *sarama.Config) *commitConn {
	_, all := conns.Child(cfg)
	return &commitConn{sem: make(chan struct{}, 1), all: all}
}

// send sends req to the coordinator and puts the outcome in answer, unless
// ctx ends while the member's previous request is still on its way (the
// coordinator lookup, on the client's connections, is bounded by sarama's
// timeouts and by Close's deadline).
func (c *commitConn) send(ctx context.Context, m *member, req *sarama.OffsetCommitRequest, answer chan<- commitAnswer) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return // the caller is gone
	}
	defer func() { <-c.sem }()
	if ctx.Err() != nil {
		return
	}
	resp, err := c.commit(ctx, m, req)
	answer <- commitAnswer{resp, err}
	// Told, the coordinator moved: sarama looks it up again before the
	// next commit.
	if err != nil {
		m.refreshCoordinator(err)
		return
	}
	for _, parts := range resp.Errors {
		for _, kerr := range parts {
			m.refreshCoordinator(kerr)
		}
	}
}

func (c *commitConn) commit(ctx context.Context, m *member, req *sarama.OffsetCommitRequest) (*sarama.OffsetCommitResponse, error) {
	coord, err := m.client.Coordinator(m.opts.GroupID)
	if err != nil {
		return nil, err
	}
	if c.b != nil && c.b.Addr() != coord.Addr() {
		c.close()
	}
	if c.b == nil {
		cfg, conns := c.all.Child(m.client.Config())
		b := sarama.NewBroker(coord.Addr())
		if err := b.Open(cfg); err != nil {
			conns.Cut()
			return nil, err
		}
		c.b, c.conns = b, conns
	}
	resp, err := c.b.CommitOffset(req)
	if err != nil {
		// The connection is broken, or was cut: the next commit opens
		// another.
		c.close()
		return nil, lookupErr(ctx, err)
	}
	return resp, nil
}

// cut fails the request on its way, if any, at once, and every later one:
// the member's commits are over (Close).
func (c *commitConn) cut() { c.all.Cut() }

// close closes the connection. The caller holds sem, or is the member's
// Close once no commit runs.
func (c *commitConn) close() {
	if c.b == nil {
		return
	}
	_ = c.b.Close()
	c.conns.Cut()
	c.b, c.conns = nil, nil
}

// refreshCoordinator asks sarama to find the group's coordinator again
// when err says it moved.
func (m *member) refreshCoordinator(err error) {
	if errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) {
		_ = m.client.RefreshCoordinator(m.opts.GroupID)
	}
}

// commitFinal commits p's handled offsets on its release, retrying up to
// Config.Consumer.Offsets.Retry.Max times (as sarama's final flush does,
// without the Metadata.Retry backoff sarama waits between its attempts)
// unless the group has moved on (the member's generation is over), all of
// it within RevokeTimeout (claim.Member.CommitFinal): a commit still
// unanswered then is abandoned, and the partition lets go. Retry.Max
// math.MaxInt (sarama accepts any count that is not negative) tries as
// often, not never.
func (m *member) commitFinal(p *partition) {
	attempts := m.client.Config().Consumer.Offsets.Retry.Max
	if attempts < math.MaxInt {
		attempts++
	}
	_ = m.cm.CommitFinal(m.hurryCtx, m.opts.RevokeTimeout, p.Claim, attempts, 0, m.send,
		func(err error) bool {
			return errors.Is(err, sarama.ErrIllegalGeneration) || errors.Is(err, sarama.ErrUnknownMemberId) ||
				errors.Is(err, sarama.ErrRebalanceInProgress) || errors.Is(err, sarama.ErrClosedClient)
		}, nil) // recorded and logged: a refused final commit is not sent again
}

// refusedByRebalance reports whether err is the broker refusing a commit
// because the group rebalances: a session's commits carry its generation
// until sarama has synced the next one (with a cooperative strategy, the
// session goes on), so those sent while the group completes a rebalance
// are refused with ILLEGAL_GENERATION, and go out again in the new one.
func refusedByRebalance(err error) bool {
	return errors.Is(err, sarama.ErrIllegalGeneration) || errors.Is(err, sarama.ErrRebalanceInProgress)
}

// commitVersion is the OffsetCommit version sarama's own offset manager
// would send for the configured protocol version.
var commitVersion = kafkaoffset.CommitVersion
