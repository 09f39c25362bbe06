// Package kafkaoffset keeps what a Kafka consumer group member may commit
// for one claimed partition: the offsets fetched from it in order, which of
// them are settled, and the end of their contiguous settled prefix, which
// it marks on the group session. A message the subscriber nacks stays
// unsettled (it is received again from memory), so it holds the commit
// back until it is acked. It also gives the OffsetCommit request version
// sarama's own offset manager sends, and the group administration the
// backends share: a new group's starting offsets (StartOffsets), retried
// with Poll, which stops at once on a refusal of permissions (Denied).
//
// The balanced subscribers of kafkatopic and the group readers of
// kafkatopology track their claims with it; the Kafka source tracks the
// same prefix with acker.Checkpoint, as Claim does.
package kafkaoffset

import (
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/acker"
)

// Session is the part of a sarama.ConsumerGroupSession a claim uses.
type Session interface {
	// MarkOffset marks offset, the offset of the next record to consume,
	// for the next commit of the partition.
	MarkOffset(topic string, partition int32, offset int64, metadata string)
	// Commit sends the marked offsets to the broker.
	Commit()
}

// Claim is one partition of one group session as a member holds it. A
// later claim of the same partition (after a rebalance, or a revoke and
// re-assign) is a new Claim, starting with nothing tracked, so settles of
// messages of the older claim never move the newer claim's commit.
//
// A Claim is not safe for concurrent use: its owner serialises every call
// under one mutex of its own, the one it passes to Release.
type Claim struct {
	topic   string
	part    int32
	sess    Session
	cp      *acker.Checkpoint // fetched offsets and the settled prefix
	marked  int64             // the offset last marked, -1 when none
	handed  int               // messages handed to the subscriber, not yet settled
	idle    chan struct{}     // cap 1: handed fell to zero
	revoked bool
}

// New returns the claim of partition part of topic in session sess.
func New(sess Session, topic string, part int32) *Claim {
	return &Claim{topic: topic, part: part, sess: sess, cp: acker.NewCheckpoint(0), marked: -1, idle: make(chan struct{}, 1)}
}

// Partition is the claim's partition.
func (c *Claim) Partition() int32 { return c.part }

// Fetch tracks off, fetched and not yet settled: the claim marks nothing
// past it until it is settled. Offsets are fetched in increasing order; an
// offset that is negative or not above every offset fetched before is
// ignored.
func (c *Claim) Fetch(off int64) {
	if off >= 0 {
		c.cp.Track(uint64(off))
	}
}

// Skip tracks off as fetched and settled at once: a record no subscriber
// receives (it does not decode, or it is for someone else).
func (c *Claim) Skip(off int64) {
	c.Fetch(off)
	c.Settle(off)
}

// Settle settles off. When that extends the contiguous prefix of settled
// offsets, the claim marks its end (the offset after its last one) on the
// session, unless the claim is revoked. An offset never fetched, settled
// already, or below the prefix is ignored.
func (c *Claim) Settle(off int64) {
	if off < 0 || !c.cp.Done(uint64(off)) || c.revoked {
		return
	}
	c.marked = int64(c.cp.Next())
	c.sess.MarkOffset(c.topic, c.part, c.marked, "")
}

// Marked is the offset the claim last marked on its session (the end of
// the settled prefix, the next commit's), -1 while it has marked none.
func (c *Claim) Marked() int64 { return c.marked }

// Hand counts a message of the claim handed to the subscriber.
func (c *Claim) Hand() { c.handed++ }

// Return uncounts a message Hand counted, when it is settled or nacked
// (its offset stays unsettled until Settle), and wakes Release once none
// is left.
func (c *Claim) Return() {
	if c.handed--; c.handed == 0 {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// Handed reports how many messages of the claim the subscriber holds.
func (c *Claim) Handed() int { return c.handed }

// Revoked reports whether Release revoked the claim.
func (c *Claim) Revoked() bool { return c.revoked }

// Release ends the claim. The caller holds mu, the owner's mutex guarding
// the claim; Release keeps it except while it waits. Unless stop is closed
// (the owner is stopping), Release first waits up to timeout for the
// messages the subscriber holds to be settled (or nacked), then revokes the
// claim: later settles mark nothing. It returns how many messages the
// subscriber still held when timeout ran out (0 when all were settled in
// time, or when stop ended the wait): the partition's next owner delivers
// them again. The caller commits what is marked with Commit, after
// unlocking mu.
func (c *Claim) Release(mu sync.Locker, stop <-chan struct{}, timeout time.Duration) (left int) {
	if c.handed > 0 && !closed(stop) {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
	wait:
		for c.handed > 0 && !closed(stop) {
			mu.Unlock()
			select {
			case <-c.idle:
			case <-stop:
			case <-timer.C:
				mu.Lock()
				left = c.handed
				break wait
			}
			mu.Lock()
		}
	}
	c.revoked = true
	return left
}

// Commit sends what the claim's session has marked to the broker.
func (c *Claim) Commit() { c.sess.Commit() }

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
