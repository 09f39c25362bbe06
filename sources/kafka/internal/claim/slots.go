package claim

import (
	"time"
	"unsafe"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// slotBlockBytes is the size of one block of slots: 8 KiB less the
// allocator's header, so that a block fills a small-object size class
// without waste (a block above 32 KiB would be a slower, zeroed large-object
// allocation).
const slotBlockBytes = 8192 - 8

// slotBlock is how many slots are allocated at once.
const slotBlock = slotBlockBytes / int(unsafe.Sizeof(slot{}))

// slot is a message and its metadata, allocated in blocks: one allocation
// per slotBlock messages, and the metadata is stored by value beside its
// message. Once the message's outcome has reached the claim, the slot goes
// back to the claim's free list and carries a later record: in the steady
// state the source allocates nothing per record (message.Message documents
// that a message is not used after its outcome was reported).
type slot struct {
	msg message.Message[[]byte]
	md  Metadata
	// live is set while the slot's message is out in the pipeline; an
	// outcome for a slot that is not live (a second outcome for one
	// message, which the pipeline never sends) does not recycle it twice.
	live bool
}

// maxFreeSlots bounds a claim's free list, in windows: more slots than
// that are only kept after a burst larger than the pipeline's queues hold
// in the steady state, and are left to the garbage collector.
const maxFreeSlots = 4

// takeSlots appends n slots to dst, from the free list first, and marks
// them live. The caller holds c.mu.
func (c *Claim) takeSlots(dst []*slot, n int) []*slot {
	k := min(n, len(c.free))
	rest := c.free[len(c.free)-k:]
	dst = append(dst, rest...)
	clear(rest)
	c.free = c.free[:len(c.free)-k]
	for n -= k; n > 0; {
		// A block of up to slotBlock slots: what the delivery needs, and
		// what the free list has room for.
		block := make([]slot, min(slotBlock, n+max(0, c.maxFree-len(c.free))))
		for i := range block {
			if n > 0 {
				dst = append(dst, &block[i])
				n--
			} else {
				c.free = append(c.free, &block[i])
			}
		}
	}
	for _, s := range dst {
		s.live = true
	}
	return dst
}

// recycle drops the references of the slot behind an outcome's ack data to
// its record (and so to the client's fetch buffer) and puts the slot back
// on the free list while the list has room. A slot left off the list is
// dropped too: its block stays reachable as long as another slot of it is
// free or live, and would keep the record's payload with it. The caller
// holds c.mu.
func (c *Claim) recycle(data any) {
	s, ok := data.(*slot)
	if !ok || !s.live {
		return
	}
	s.live = false
	if s.msg.Deferred() {
		// A deferred message's outcome may come while the pipeline still
		// holds it (see message.Message.Defer): it is neither changed nor
		// reused.
		return
	}
	s.msg.Data = nil
	s.md.Key = nil
	if s.md.Headers != nil {
		s.md.Headers = nil
	}
	if len(c.free) < c.maxFree {
		c.free = append(c.free, s)
	}
}

// Record is what a delivery takes from a client's record.
type Record struct {
	Offset    int64
	Key       []byte
	Value     []byte
	Timestamp time.Time
	// Headers is how many headers the record has; the headers themselves
	// are appended by the delivery's header function.
	Headers int
}

// Deliver hands recs, the next records of the partition in offset order,
// to the claim's feed: each becomes a message (from the claim's slots)
// carrying a *Metadata, acknowledged to the claim. get reads a record;
// headers appends a record's headers to dst (it is called only for records
// with headers). The caller has taken a permit per record. If the feed is
// closed, the records are forgotten as withdrawn ones are.
func Deliver[R any](c *Claim, recs []R, get func(R) Record, headers func(dst []Header, r R) []Header) {
	// Track the offsets and take the slots in one short critical section
	// (acks of earlier messages take the same lock), before any of them can
	// be acked.
	n := len(recs)
	c.mu.Lock()
	if n > 0 {
		c.from(get(recs[0]).Offset)
	}
	for _, r := range recs {
		c.cp.Track(uint64(get(r).Offset))
	}
	c.slots = c.takeSlots(c.slots[:0], n)
	c.mu.Unlock()
	var hdrs []Header
	c.msgs = c.msgs[:0]
	for i, r := range recs {
		rec := get(r)
		s := c.slots[i]
		// A slot stays with its claim, so most fields already hold what
		// they should: write only what changes, which keeps the garbage
		// collector's write barriers (taken by every pointer store while
		// it marks) off the rest.
		md := &s.md
		if md.Topic != c.Topic || md.Partition != c.Part || md.GenerationID != c.Generation || md.MemberID != c.MemberID || md.Group != c.Group {
			md.Topic, md.Partition, md.GenerationID, md.MemberID, md.Group = c.Topic, c.Part, c.Generation, c.MemberID, c.Group
		}
		md.Offset = rec.Offset
		md.Key = rec.Key
		md.Timestamp = rec.Timestamp
		if md.Headers != nil {
			md.Headers = nil
		}
		if rec.Headers > 0 {
			if hdrs == nil {
				// One array for the headers of this delivery.
				nh := 0
				for _, r := range recs[i:] {
					nh += get(r).Headers
				}
				hdrs = make([]Header, 0, nh)
			}
			start := len(hdrs)
			hdrs = headers(hdrs, r)
			md.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		if a, _, data := s.msg.Acknowledger(); a == acker.Acknowledger(c) && data == any(s) &&
			s.msg.Metadata == any(md) && s.msg.PartitionKey() == c.Key {
			s.msg.Reuse(rec.Value, uint64(rec.Offset))
		} else {
			// A fresh slot (or one a handler changed).
			s.msg.Init(rec.Value, c, uint64(rec.Offset))
			s.msg.SetAckData(s)
			s.msg.Metadata = md
			s.msg.SetPartitionKey(c.Key)
		}
		c.msgs = append(c.msgs, &s.msg)
	}
	clear(c.slots)
	if !c.Feed.TryDeliver(c.msgs...) {
		// The feed closed (the pipeline stops): these messages get no
		// outcome, so the claim must not wait for them, and no offset
		// after them is skipped (Skip) past them.
		c.mu.Lock()
		c.refused = true
		c.mu.Unlock()
		c.forget(c.msgs)
	}
	clear(c.msgs)
}

// from is called, under c.mu, with the offset of the next record (or
// skipped offset) the claim is handed, first.
func (c *Claim) from(first int64) {
	if uint64(first) < c.cp.Next() && c.cp.Pending() == 0 {
		// The client reads from below where the claim was told it starts,
		// with nothing in flight: the committed offset was out of range
		// (past the end of a truncated log) and the client reset to
		// InitialOffset's, or it found the log truncated under it. The
		// claim's prefix starts there, else these records would go
		// untracked and the commit would never follow them.
		c.cp.Reset(uint64(first))
		c.failedAhead = c.failedAhead[:0]
		c.start.Store(first)
	} else if c.start.Load() < 0 {
		c.start.Store(first) // the claim was not told where it starts
	}
}

// Skip takes offsets, in increasing order and each above every offset
// delivered or skipped before, as offsets the client fetched that hold no
// record to deliver (transactions' commit and abort markers): each counts
// as handled, and the handled prefix moves past it once every record
// delivered before it is handled. A partition whose last write ended a
// transaction is so committed up to its high-water mark. Skip does
// nothing once the claim was released, or once a delivery was refused by
// a closed feed: the records of that delivery, below offsets, were not
// handled. Only the claim's reader calls it.
func (c *Claim) Skip(offsets ...int64) {
	if len(offsets) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released || c.refused {
		return
	}
	c.from(offsets[0])
	advanced := false
	for _, o := range offsets {
		if c.cp.Track(uint64(o)) && c.cp.Done(uint64(o)) {
			advanced = true
		}
	}
	if advanced {
		c.advanced()
	}
}

// Queue is a claim's read-ahead: records taken from the client and not yet
// delivered. It is a window over a buffer that moves forward; it goes back
// to the start of the buffer when it is empty, or is copied there once it
// nears the end, so records are not shifted on every delivery. It is not
// safe for concurrent use.
type Queue[R any] struct {
	q, buf []R
}

// NewQueue returns a queue with room for capacity records before it grows.
func NewQueue[R any](capacity int) Queue[R] {
	buf := make([]R, 0, capacity)
	return Queue[R]{q: buf, buf: buf}
}

// Len reports how many records the queue holds.
func (q *Queue[R]) Len() int { return len(q.q) }

// Head returns the first n records (they stay queued).
func (q *Queue[R]) Head(n int) []R { return q.q[:n] }

// Last returns the last record; the queue is not empty.
func (q *Queue[R]) Last() R { return q.q[len(q.q)-1] }

// Push appends records.
func (q *Queue[R]) Push(rs ...R) { q.q = append(q.q, rs...) }

// Consume drops the first n records.
func (q *Queue[R]) Consume(n int) {
	clear(q.q[:n])
	q.q = q.q[n:]
	switch {
	case len(q.q) == 0:
		q.q = q.buf[:0]
	case cap(q.q) < cap(q.buf)/2 && len(q.q) <= cap(q.buf)/2:
		// Disjoint: q.q starts beyond the first half of buf (or is an
		// array of its own after the read-ahead outgrew buf).
		k := copy(q.buf[:cap(q.buf)], q.q)
		clear(q.q)
		q.q = q.buf[:k]
	}
}
