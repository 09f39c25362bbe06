package franz

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// partition is one claim of one partition: the shared claim state
// (permits, handled prefix, slots, acknowledger) and what franz-go adds
// (the records the poll loop hands over, the high-water mark, pausing and
// rewinding through the client).
type partition struct {
	*claim.Claim
	m   *member
	log *slog.Logger
	// hw is the end of the latest fetch that brought records, as a reader
	// of the member's isolation level reads up to (readableEnd).
	hw atomic.Int64

	inMu     sync.Mutex
	inbox    []*kgo.Record // polled, not yet taken by the reader
	gone     bool          // the reader has returned: push recycles what it is handed
	spare    []*kgo.Record // the reader's last inbox, for reuse
	rewindAt int64         // while rewinding: records after it are from before the rewind, -1 otherwise
	wake     chan struct{}
	// ends are the offsets of the transaction markers (control records)
	// the reader took in and has not skipped yet (claim.Skip): each waits
	// until the records before it are delivered. Only the reader uses it.
	ends []int64
	// pushed counts the hand-overs of the poll loop; decided is the count
	// the reader has taken in and decided on (whether its read-ahead is
	// full): the poll loop does not poll again while a claim has records
	// it has not decided on, so a window bounds the read-ahead however
	// late the reader runs. noGate (max uint64) while the reader waits out
	// a redelivery backoff.
	pushed  atomic.Uint64
	decided atomic.Uint64

	// startMu guards lookup and held: a claim placed by startLater waits
	// for lookup (nil once it no longer waits) and is held paused in the
	// client until startAt sets its start, or until it is released while
	// the client goes on (stopWaiting): the reader never resumes it.
	startMu sync.Mutex
	lookup  *startLookup
	held    bool

	stopOnce sync.Once
	stopCh   chan struct{} // closed when the claim is revoked or lost
	done     chan struct{} // closed when the reader has returned
	released chan struct{} // closed when the claim's release (and its commit) is over
	// revoking is set when the client revokes the claim, before its
	// release or while Close's is under way (revoked): the rebalance waits
	// for the release, so its final commit has no later generation to go
	// out in.
	revoking atomic.Bool
}

func (m *member) newPartition(topic string, part, gen int32, memberID string) *partition {
	p := &partition{m: m, rewindAt: -1, wake: make(chan struct{}, 1), stopCh: make(chan struct{}), done: make(chan struct{}),
		released: make(chan struct{})}
	p.Claim = claim.New(claim.Config{
		Topic:      topic,
		Partition:  part,
		Generation: gen,
		MemberID:   memberID,
		Group:      m.opts.GroupID,
		Policy:     m.opts.FailurePolicy,
		Window:     m.stage.Flow().MaxWindow(),
		Committed:  -1,
		Start:      -1,
		Log:        m.log,
		OnAdvance:  m.cm.Advanced,
		HighWater:  p.hw.Load,
	})
	p.log = m.log.With(slog.String("partition", p.Key), slog.Int("generation", int(gen)))
	return p
}

// push hands polled records (in offset order) to the reader. It never
// blocks on the reader: the reader pauses the partition once a window of
// records waits.
func (p *partition) push(recs []*kgo.Record, hw int64) {
	p.hw.Store(hw)
	p.inMu.Lock()
	if p.gone {
		p.inMu.Unlock()
		p.m.drop(recs)
		return
	}
	if p.rewindAt >= 0 {
		// Records fetched before the rewind come after the offset it
		// rewinds to; the first one at or before it is the rewound fetch.
		i := 0
		for i < len(recs) && recs[i].Offset > p.rewindAt {
			i++
		}
		p.m.drop(recs[:i])
		recs = recs[i:]
		if len(recs) > 0 {
			p.rewindAt = -1
		}
	}
	p.inbox = append(p.inbox, recs...)
	p.pushed.Add(1)
	p.inMu.Unlock()
	claim.Signal(p.wake)
}

// noGate is decided's value while the reader does not take records in.
const noGate = ^uint64(0)

// undecided reports whether the poll loop handed the reader records it has
// not taken in and decided on yet. A reader that has returned never will.
func (p *partition) undecided() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	return p.pushed.Load() > p.decided.Load()
}

// takeInbox returns what the poll loop handed over since the last call,
// and the count of hand-overs it covers. The slice is the reader's until
// the next call.
func (p *partition) takeInbox() ([]*kgo.Record, uint64) {
	p.inMu.Lock()
	in := p.inbox
	clear(p.spare)
	p.inbox, p.spare = p.spare[:0], in
	seq := p.pushed.Load()
	p.inMu.Unlock()
	return in, seq
}

// stop ends the reader and waits for it.
func (p *partition) stop() {
	p.stopOnce.Do(func() { close(p.stopCh) })
	<-p.done
}

// setPaused pauses or resumes fetching the partition. A partition held
// for its start offset (startLater) stays paused.
func (p *partition) setPaused(paused *bool, v bool) {
	if *paused == v {
		return
	}
	*paused = v
	if !v && p.isHeld() {
		return
	}
	tp := map[string][]int32{p.Topic: {p.Part}}
	if v {
		p.m.client().PauseFetchPartitions(tp)
	} else {
		p.m.client().ResumeFetchPartitions(tp)
	}
}

// isHeld reports whether the partition is held paused for its start
// offset.
func (p *partition) isHeld() bool {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	return p.held
}

// startAt starts the claim, which waits for l, at offset at: the claim
// learns its start, then the client is moved there and resumes the
// partition, so that no record of it arrives before. It does nothing once
// the claim no longer waits for l (it was released).
func (p *partition) startAt(l *startLookup, at int64) {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	if p.lookup != l {
		return
	}
	p.lookup, p.held = nil, false
	l.waiting.Add(-1)
	p.Begin(-1, at)
	cl := p.m.client()
	cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{p.Topic: {p.Part: {Epoch: -1, Offset: at}}})
	cl.ResumeFetchPartitions(map[string][]int32{p.Topic: {p.Part}})
	p.log.Debug("kafka partition claimed", slog.Int64("offset", at), slog.Int64("committed", -1))
}

// stopWaiting ends the claim's wait for its start offset, if it waits,
// as it is released: the lookup ends once no claim waits for it. With
// resume (the client goes on with the group), the partition is resumed in
// the client, which would keep it paused were it assigned again; without
// (the member closes), it stays paused at the offset it was placed at,
// never fetched.
func (p *partition) stopWaiting(resume bool) {
	p.startMu.Lock()
	l := p.lookup
	p.lookup = nil
	unhold := resume && p.held
	if unhold {
		p.held = false
	}
	p.startMu.Unlock()
	if l != nil && l.waiting.Add(-1) == 0 {
		l.cancel()
	}
	if unhold {
		p.m.client().ResumeFetchPartitions(map[string][]int32{p.Topic: {p.Part}})
	}
}

// stallTimeout is how long a claim with a full read-ahead holds the
// member's poll loop back before it pauses its partition instead (the
// processors are stuck), so that the member's other partitions keep
// flowing.
const stallTimeout = 100 * time.Millisecond

// setBlocking records whether the claim holds the member's poll loop back.
func (p *partition) setBlocking(blocking *bool, v bool) {
	if *blocking == v {
		return
	}
	*blocking = v
	if v {
		p.m.blocked.Add(1)
	} else if p.m.blocked.Add(-1) == 0 {
		claim.Signal(p.m.room)
	}
}

// run moves records from the poll loop to the feed as permits allow,
// until the claim is revoked or lost.
//
// Flow control: the claim delivers as many records as it holds permits.
// While a window of records taken from the client waits undelivered, the
// claim holds the member's poll loop back: franz-go then keeps at most one
// fetch per broker buffered, and the steady state costs no pause / resume
// of fetch sessions. The poll loop also waits for the claim to take in and
// decide on every hand-over before it polls again, so that a claim whose
// goroutine runs late is not handed poll after poll beyond its window. If no permit comes back within stallTimeout (the
// processors are stuck), the claim pauses its partition (franz-go stops
// fetching it and drops what it buffered of it) and lets the poll loop go
// on for the other partitions; it resumes the partition once its
// read-ahead falls below the window. The read-ahead is so bounded by a
// window plus what one poll returned for the partition.
func (p *partition) run() {
	// After done is closed: a poll loop waiting for this reader's decision
	// looks again and finds it gone.
	defer claim.Signal(p.m.room)
	defer close(p.done)
	window := p.m.stage.Flow().MaxWindow()
	q := claim.NewQueue[*kgo.Record](2 * window)
	paused, blocking, stalled, draining := false, false, false, false
	drainCh := p.m.drainCh
	stall := time.NewTimer(stallTimeout)
	stall.Stop()
	armed := false
	defer func() {
		// What the reader still holds, or is handed from now on, is never
		// delivered: recycle it, so that its batches' slices go back.
		p.dropUndelivered(&q, func() { p.gone = true })
		stall.Stop()
		p.setBlocking(&blocking, false)
		// A paused partition stays paused in the client, even when it is
		// assigned again later.
		p.setPaused(&paused, false)
	}()
	for {
		in, seq := p.takeInbox()
		if len(in) > 0 {
			p.Next.Store(in[len(in)-1].Offset + 1)
			if !draining {
				p.takeIn(&q, in)
			} else {
				p.m.drop(in)
			}
		}
		if draining {
			p.m.drop(q.Head(q.Len()))
			q.Consume(q.Len())
			p.ends = p.ends[:0]
		} else if q.Len() > 0 {
			if n := p.Take(q.Len()); n > 0 {
				delivered := q.Head(n)
				claim.Deliver(p.Claim, delivered, kgoRecord, kgoHeaders)
				// The messages hold what they need of the records.
				p.m.drop(delivered)
				q.Consume(n)
			}
		}
		if len(p.ends) > 0 {
			p.skipEnds(&q)
		}
		p.ReadAhead.Store(int32(q.Len()))
		full := !draining && q.Len() >= window
		if !full {
			stalled = false
			if armed {
				stall.Stop()
				armed = false
			}
		} else if !stalled && !armed {
			stall.Reset(stallTimeout)
			armed = true
		}
		p.setBlocking(&blocking, full && !stalled)
		p.setPaused(&paused, draining || (full && stalled))
		if p.decided.Swap(seq) != seq {
			// The poll loop may wait for this decision.
			claim.Signal(p.m.room)
		}
		var stallC <-chan time.Time
		if armed {
			stallC = stall.C
		}
		select {
		case <-p.wake:
		case <-p.GrantCh:
		case <-stallC:
			armed = false
			stalled = true
		case <-p.RetryCh:
			if !draining && !p.redeliver(&q, &paused, &blocking) {
				return
			}
		case <-drainCh:
			draining = true
			drainCh = nil
		case <-p.stopCh:
			return
		}
	}
}

// takeIn adds the records in, handed over by the poll loop, to the
// read-ahead q, but for the transaction markers among them (control
// records, which the client returns with kgo.KeepControlRecords): those
// are never delivered, and their offsets go to ends instead.
func (p *partition) takeIn(q *claim.Queue[*kgo.Record], in []*kgo.Record) {
	i := 0
	for i < len(in) && !in[i].Attrs.IsControl() {
		i++
	}
	if i == len(in) {
		q.Push(in...)
		return
	}
	q.Push(in[:i]...)
	recycle := p.m.recycle.Load()
	for _, r := range in[i:] {
		if !r.Attrs.IsControl() {
			q.Push(r)
			continue
		}
		p.ends = append(p.ends, r.Offset)
		if recycle {
			r.Recycle()
		}
	}
}

// skipEnds skips (claim.Skip) the markers of ends that no record of the
// read-ahead q precedes: every record before them was delivered.
func (p *partition) skipEnds(q *claim.Queue[*kgo.Record]) {
	n := len(p.ends)
	if q.Len() > 0 {
		next := q.Head(1)[0].Offset
		n = 0
		for n < len(p.ends) && p.ends[n] < next {
			n++
		}
	}
	if n == 0 {
		return
	}
	p.Skip(p.ends[:n]...)
	p.ends = p.ends[:copy(p.ends, p.ends[n:])]
}

func kgoRecord(r *kgo.Record) claim.Record {
	return claim.Record{Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: len(r.Headers)}
}

func kgoHeaders(dst []claim.Header, r *kgo.Record) []claim.Header {
	for _, h := range r.Headers {
		dst = append(dst, claim.Header{Key: []byte(h.Key), Value: h.Value})
	}
	return dst
}

// redeliver rewinds the partition to the lowest failed offset: what was
// fetched after it is dropped, and after RedeliveryBackoff the client
// fetches the partition again from there. It reports false when the claim
// ended meanwhile.
func (p *partition) redeliver(q *claim.Queue[*kgo.Record], paused, blocking *bool) bool {
	at := p.RetryAt()
	if at < 0 {
		return true
	}
	// What was fetched after the failed message is dropped: the read-ahead,
	// what the poll loop still hands over, and what still waits in the
	// stage buffer.
	p.setPaused(paused, true)
	p.dropUndelivered(q, func() { p.rewindAt = at })
	p.setBlocking(blocking, false)
	p.Withdraw()
	p.LogRewind(p.log, at, p.m.opts.RedeliveryBackoff)
	// The partition is paused and what arrives is dropped: the poll loop
	// need not wait for this reader until it takes records in again.
	p.decided.Store(noGate)
	claim.Signal(p.m.room)
	t := time.NewTimer(p.m.opts.RedeliveryBackoff)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stopCh:
		return false
	case <-p.m.drainCh:
		return true // draining: nothing more is delivered anyway
	}
	if at = p.TakeRetry(); at < 0 {
		return true
	}
	p.dropUndelivered(nil, func() { p.rewindAt = at })
	p.m.client().SetOffsets(map[string]map[int32]kgo.EpochOffset{p.Topic: {p.Part: {Epoch: -1, Offset: at}}})
	p.Next.Store(at)
	p.setPaused(paused, false)
	return true
}

// dropUndelivered recycles the records the poll loop handed over and, when
// q is not nil, the reader's read-ahead q, none of which will be
// delivered; under the inbox's lock, it first calls locked (which sets
// what push must do with records still on their way).
func (p *partition) dropUndelivered(q *claim.Queue[*kgo.Record], locked func()) {
	p.inMu.Lock()
	locked()
	p.m.drop(p.inbox)
	clear(p.inbox)
	p.inbox = p.inbox[:0]
	p.inMu.Unlock()
	if q != nil {
		p.m.drop(q.Head(q.Len()))
		q.Consume(q.Len())
		p.ends = p.ends[:0]
	}
}

// drop recycles records the source is done with (delivered, or dropped
// undelivered), when the member recycles records at all (see recyclable).
func (m *member) drop(recs []*kgo.Record) {
	if !m.recycle.Load() {
		return
	}
	for _, r := range recs {
		r.Recycle()
	}
}
