package acker

import "math"

// Checkpoint tracks the positions (offsets, sequence numbers) of one ordered
// stream whose messages are handed out in increasing order and acknowledged
// in any order, and reports the contiguous acknowledged prefix: the position
// a source may commit so that a restart resumes at the first message that
// was not handled.
//
// Positions need not be consecutive (Kafka offsets have gaps after
// compaction or around transaction markers): only the positions passed to
// Track count. The committable position, Next, is one past the last position
// of the prefix of tracked positions that are all done, or the position
// given to NewCheckpoint or Reset when nothing has been done yet.
//
// Track, Done and Truncate are O(1) amortised, O(log n) for Done when acks
// arrive out of order, and do not allocate once the internal ring has grown
// to the number of positions in flight. A Checkpoint is not safe for
// concurrent use: callers serialise access (a source usually holds one
// mutex per partition around it and its own state).
type Checkpoint struct {
	pos   []uint64 // ring of tracked positions, increasing from head
	done  []bool   // parallel to pos
	head  int      // index of the oldest tracked position
	n     int      // number of tracked positions
	next  uint64   // committable position
	last  uint64   // highest position ever tracked, valid when tracked
	track bool     // whether last is valid
}

// NewCheckpoint returns a checkpoint whose committable position is next:
// the position of the first message the stream will hand out.
func NewCheckpoint(next uint64) *Checkpoint {
	return &Checkpoint{next: next}
}

// Reset forgets every tracked position and makes next the committable
// position, keeping the allocated ring.
func (c *Checkpoint) Reset(next uint64) {
	clear(c.done)
	c.head, c.n, c.next, c.track = 0, 0, next, false
}

// Next returns the committable position: every tracked position below it is
// done, and the stream resumes there after a restart.
func (c *Checkpoint) Next() uint64 { return c.next }

// Pending reports how many tracked positions are not yet part of the done
// prefix (in flight, or done behind one that is not).
func (c *Checkpoint) Pending() int { return c.n }

// Track records that the message at pos was handed out. Positions must be
// tracked in increasing order; Track reports false (and ignores pos) when pos
// is not above every position tracked before, or is below Next, or is
// math.MaxUint64, which has no committable position one past it.
func (c *Checkpoint) Track(pos uint64) bool {
	if pos < c.next || (c.track && pos <= c.last) || pos == math.MaxUint64 {
		return false
	}
	if c.n == len(c.pos) {
		c.grow()
	}
	i := (c.head + c.n) & (len(c.pos) - 1)
	c.pos[i] = pos
	c.done[i] = false
	c.n++
	c.last, c.track = pos, true
	return true
}

func (c *Checkpoint) grow() {
	size := max(16, 2*len(c.pos))
	pos := make([]uint64, size)
	done := make([]bool, size)
	for k := range c.n {
		j := (c.head + k) & (len(c.pos) - 1)
		pos[k], done[k] = c.pos[j], c.done[j]
	}
	c.pos, c.done, c.head = pos, done, 0
}

// at returns the ring index of the k-th tracked position.
func (c *Checkpoint) at(k int) int { return (c.head + k) & (len(c.pos) - 1) }

// find returns k such that the k-th tracked position is pos, or -1.
func (c *Checkpoint) find(pos uint64) int {
	if c.n == 0 || pos < c.pos[c.head] || pos > c.last {
		return -1
	}
	// Acks mostly arrive in order: try the oldest position first.
	if c.pos[c.head] == pos {
		return 0
	}
	lo, hi := 0, c.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.pos[c.at(mid)] < pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < c.n && c.pos[c.at(lo)] == pos {
		return lo
	}
	return -1
}

// Done records that the message at pos was handled and reports whether the
// committable position moved. Unknown positions (never tracked, already
// part of the committed prefix, or dropped by Truncate) and repeated acks are
// ignored.
func (c *Checkpoint) Done(pos uint64) (advanced bool) {
	k := c.find(pos)
	if k < 0 {
		return false
	}
	c.done[c.at(k)] = true
	for c.n > 0 && c.done[c.head] {
		c.next = c.pos[c.head] + 1
		c.done[c.head] = false
		c.head = (c.head + 1) & (len(c.pos) - 1)
		c.n--
		advanced = true
	}
	return advanced
}

// IsPending reports whether pos is tracked and not yet done.
func (c *Checkpoint) IsPending(pos uint64) bool {
	k := c.find(pos)
	return k >= 0 && !c.done[c.at(k)]
}

// Truncate forgets every tracked position at or above from, for a stream
// that rewinds to from and hands those messages out again (they are then
// tracked anew). Positions below from are kept. Next is unchanged unless it
// was above from, which cannot happen for a position that was still tracked.
func (c *Checkpoint) Truncate(from uint64) {
	for c.n > 0 {
		i := c.at(c.n - 1)
		if c.pos[i] < from {
			break
		}
		c.done[i] = false
		c.n--
	}
	if c.n > 0 {
		c.last = c.pos[c.at(c.n-1)]
	} else {
		c.track = false
	}
}
