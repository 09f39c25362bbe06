package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// partition is one claim of one partition within one group generation: its
// feed, its read-ahead queue and its acknowledger. A later claim of the same
// partition (another generation, or the same one after a cooperative
// revoke and re-assign) gets a new partition value, so acks of an older claim
// can never move a newer claim's offset.
type partition struct {
	m          *member
	sess       sarama.ConsumerGroupSession
	topic      string
	part       int32
	key        string // partition key and feed name: one string per claim
	generation int32
	memberID   string
	feed       *producer.Feed[[]byte]

	permits atomic.Int64  // granted and not yet used
	grantCh chan struct{} // signalled by grants

	// For commits and Stats; written where the claim already works on them.
	marked    atomic.Int64                // end of the handled prefix: the offset to commit
	committed atomic.Int64                // the offset the broker last accepted, -1 when none
	next      atomic.Int64                // the offset after the last record taken from sarama
	readAhead atomic.Int32                // records taken from sarama, not yet delivered
	claimPC   highWater                   // the claim's consumer
	ownPC     atomic.Pointer[ownConsumer] // while rewound or moved to a start offset

	mu       sync.Mutex
	cp       *acker.Checkpoint
	free     []*slot // slots whose messages were acknowledged, for reuse
	maxFree  int     // bound of free
	released bool
	retryAt  int64 // lowest offset to redeliver, -1 when none
	holdAt   int64 // lowest offset interrupted by the shutdown, -1 when none: never committed past
	retryCh  chan struct{}
	settled  chan struct{} // signalled when nothing is pending
}

// Ack records the outcomes of the claim's messages and marks the contiguous
// handled prefix for the next commit. It ignores outcomes that arrive after
// the claim was released.
//
// A failure the pipeline's shutdown caused (acker.Interrupted) holds the
// claim's commit below its offset for good, whatever its disposition or the
// failure policy: the record was not handled, so it is left for the next
// owner. The claim does not rewind for it (the pipeline is stopping), and
// it stops waiting for the records after it (they are delivered again
// anyway), so that the release is not held up by them.
func (p *partition) Ack(_ context.Context, successful, failed []acker.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return
	}
	advanced := false
	for i := range successful {
		if p.cp.Done(successful[i].ID) {
			advanced = true
		}
		p.recycle(successful[i].Data)
	}
	discarded, redeliver, interrupted := 0, 0, 0
	for i := range failed {
		o := &failed[i]
		p.recycle(o.Data)
		if acker.Interrupted(*o) {
			interrupted++
			if p.holdAt < 0 || int64(o.ID) < p.holdAt {
				p.holdAt = int64(o.ID)
			}
			continue
		}
		if p.m.opts.redeliver(o.Disposition) {
			if p.cp.IsPending(o.ID) {
				redeliver++
				if p.retryAt < 0 || int64(o.ID) < p.retryAt {
					p.retryAt = int64(o.ID)
				}
			}
			continue
		}
		discarded++
		if p.cp.Done(o.ID) {
			advanced = true
		}
	}
	if interrupted > 0 {
		// Forget the tracked offsets from the held one on: the claim no
		// longer waits for them, and their acks cannot move the commit.
		p.cp.Truncate(uint64(p.holdAt))
	}
	if len(failed) > 0 {
		// The stage that failed the messages logged each of them; this
		// line only says what the claim does with them.
		p.m.log.Debug("kafka messages failed",
			slog.String("partition", p.key), slog.Int("committed_past", discarded), slog.Int("to_redeliver", redeliver),
			slog.Int("interrupted", interrupted))
	}
	if redeliver > 0 {
		signal(p.retryCh)
	}
	if advanced {
		next := p.committable()
		p.sess.MarkOffset(p.topic, p.part, next, "")
		p.marked.Store(next)
		if p.m.commitWake != nil { // CommitOnAck
			signal(p.m.commitWake)
		}
	}
	if p.cp.Pending() == 0 {
		signal(p.settled)
	}
}

// committable is the offset the claim may commit: the end of the handled
// prefix, never past an offset the shutdown interrupted. The caller holds
// p.mu.
func (p *partition) committable() int64 {
	next := int64(p.cp.Next())
	if p.holdAt >= 0 && next > p.holdAt {
		return p.holdAt
	}
	return next
}

// highWater is what sarama's partition consumers offer to read the
// partition's high-water mark (from their latest fetch response).
type highWater interface{ HighWaterMarkOffset() int64 }

// ownConsumer is a partition consumer of the member reading a claimed
// partition instead of the claim's own.
type ownConsumer struct{ pc sarama.PartitionConsumer }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (p *partition) grant(n int) {
	p.permits.Add(int64(n))
	signal(p.grantCh)
}

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
// them live. The caller holds p.mu.
func (p *partition) takeSlots(dst []*slot, n int) []*slot {
	k := min(n, len(p.free))
	rest := p.free[len(p.free)-k:]
	dst = append(dst, rest...)
	clear(rest)
	p.free = p.free[:len(p.free)-k]
	for n -= k; n > 0; {
		// A block of up to slotBlock slots: what the delivery needs, and
		// what the free list has room for.
		block := make([]slot, min(slotBlock, n+max(0, p.maxFree-len(p.free))))
		for i := range block {
			if n > 0 {
				dst = append(dst, &block[i])
				n--
			} else {
				p.free = append(p.free, &block[i])
			}
		}
	}
	for _, s := range dst {
		s.live = true
	}
	return dst
}

// recycle puts the slot behind an outcome's ack data back on the free list,
// dropping its references to the record (and so to sarama's fetch buffer).
// The caller holds p.mu.
func (p *partition) recycle(data any) {
	s, ok := data.(*slot)
	if !ok || !s.live {
		return
	}
	s.live = false
	if len(p.free) >= p.maxFree {
		return
	}
	s.msg.Data = nil
	s.md.Key = nil
	if s.md.Headers != nil {
		s.md.Headers = nil
	}
	p.free = append(p.free, s)
}

// pauser is what sarama's partition consumers (and so its group claims)
// offer to stop and restart fetching one partition.
type pauser interface {
	Pause()
	Resume()
}

// consumeClaim runs for as long as the member holds the partition.
func (m *member) consumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	p := &partition{
		m:          m,
		sess:       sess,
		topic:      claim.Topic(),
		part:       claim.Partition(),
		key:        fmt.Sprintf("%s/%d", claim.Topic(), claim.Partition()),
		generation: sess.GenerationID(),
		memberID:   sess.MemberID(),
		grantCh:    make(chan struct{}, 1),
		maxFree:    maxFreeSlots * m.stage.Flow().MaxWindow(),
		retryAt:    -1,
		holdAt:     -1,
		retryCh:    make(chan struct{}, 1),
		settled:    make(chan struct{}, 1),
	}
	log := m.log.With(slog.String("partition", p.key), slog.Int("generation", int(p.generation)))
	committed := claim.InitialOffset() // the group's committed offset, when there is one
	if committed < 0 {
		committed = -1
	}
	p.committed.Store(committed)
	p.marked.Store(committed)
	p.claimPC = claim
	start, move, err := m.startOffset(claim)
	if err != nil {
		log.Error("kafka partition start offset cannot be found; ending the claim so that the group rejoins",
			slog.String("initial_offset", m.opts.InitialOffset), slog.Any("error", flat(err)))
		return nil
	}
	p.next.Store(max(start, -1)) // -1 when the claim starts at sarama's newest or oldest: unknown until the first record
	if start < 0 {
		start = 0
	}
	p.cp = acker.NewCheckpoint(uint64(start))

	r := reader{p: p, claim: claim, in: claim.Messages(), log: log}
	if ps, ok := claim.(pauser); ok {
		r.claimPause = ps
	}
	if move && !r.moveTo(start) {
		return nil
	}
	p.feed = m.stage.NewFeed(p.key, p.grant)
	m.claimsMu.Lock()
	m.noteSession(sess)
	m.claims[p] = struct{}{}
	m.claimsMu.Unlock()
	log.Debug("kafka partition claimed", slog.Int64("offset", start), slog.Int64("committed", committed))
	m.hookAssigned(p)
	r.run()

	// Stop dispatching: nothing more is delivered, what still waits in the
	// stage buffer is withdrawn and the read-ahead is dropped (the next
	// owner fetches them again).
	if n := r.withdraw(); n > 0 {
		log.Debug("kafka partition withdrew its undispatched messages", slog.Int("messages", n))
	}
	p.feed.Close()
	r.closeOwn()
	p.release(log)
	m.claimsMu.Lock()
	delete(m.claims, p)
	m.claimsMu.Unlock()
	m.hookRevoked(p)
	return nil
}

// startOffset returns where a new claim starts and whether it must be
// moved there (its consumer starts elsewhere): with BeginReset, a
// partition the group committed starts at InitialOffset's offset; with
// OffsetTimestamp, a partition without a committed offset starts at the
// first record at or after StartTime (after the newest when none is), found
// with a ListOffsets request by time.
func (m *member) startOffset(claim sarama.ConsumerGroupClaim) (int64, bool, error) {
	init := claim.InitialOffset()
	hasCommitted := init >= 0
	if !(m.opts.BeginOffset == BeginReset && hasCommitted) && !(m.opts.InitialOffset == OffsetTimestamp && !hasCommitted) {
		return init, false, nil
	}
	at := sarama.OffsetNewest
	switch m.opts.InitialOffset {
	case OffsetEarliest:
		at = sarama.OffsetOldest
	case OffsetTimestamp:
		at = m.opts.StartTime.UnixMilli()
	}
	off, err := m.client.GetOffset(claim.Topic(), claim.Partition(), at)
	if err == nil && off < 0 {
		off, err = m.client.GetOffset(claim.Topic(), claim.Partition(), sarama.OffsetNewest)
	}
	if err != nil {
		return 0, false, err
	}
	return off, off != init, nil
}

// release waits, at most RevokeTimeout, for the claim's in-flight messages,
// then stops accepting acks and commits what was handled.
func (p *partition) release(log *slog.Logger) {
	t := time.NewTimer(p.m.opts.RevokeTimeout)
	defer t.Stop()
	p.mu.Lock()
	inFlight := p.cp.Pending()
	p.mu.Unlock()
	log.Debug("kafka partition releasing", slog.Int("in_flight", inFlight))
	for {
		p.mu.Lock()
		pending := p.cp.Pending()
		p.mu.Unlock()
		if pending == 0 {
			break
		}
		select {
		case <-p.settled:
			continue
		case <-t.C:
		case <-p.m.hurry:
		}
		log.Warn("kafka partition released with messages still in flight; they will be delivered again",
			slog.Int("pending", pending))
		break
	}
	// Acks marked every advance of the handled prefix already; the claim
	// stops taking them and commits.
	p.mu.Lock()
	p.released = true
	p.mu.Unlock()
	p.m.commitFinal(p)
	log.Debug("kafka partition released", slog.Int64("committed", p.committed.Load()))
}

// reader moves records from sarama to the feed as permits allow.
type reader struct {
	p          *partition
	claim      sarama.ConsumerGroupClaim
	in         <-chan *sarama.ConsumerMessage // the claim's messages
	claimPause pauser
	log        *slog.Logger

	own       sarama.PartitionConsumer // set while rewound to redeliver
	ownErrors <-chan *sarama.ConsumerError
	paused    bool

	q     []*sarama.ConsumerMessage // read ahead, a window over qbuf
	qbuf  []*sarama.ConsumerMessage
	msgs  []*message.Message[[]byte]
	slots []*slot
}

// setPaused pauses or resumes fetching the partition from whichever
// consumer is reading it.
func (r *reader) setPaused(v bool) {
	if v == r.paused {
		return
	}
	r.paused = v
	var ps pauser = r.claimPause
	if r.own != nil {
		ps = r.own
	}
	if ps == nil {
		tp := map[string][]int32{r.p.topic: {r.p.part}}
		if v {
			r.p.m.group.Pause(tp)
		} else {
			r.p.m.group.Resume(tp)
		}
		return
	}
	if v {
		ps.Pause()
	} else {
		ps.Resume()
	}
}

func (r *reader) closeOwn() {
	if r.own == nil {
		return
	}
	r.p.ownPC.Store(nil)
	r.own.AsyncClose()
	for range r.own.Messages() {
	}
	for range r.own.Errors() {
	}
	r.own, r.ownErrors = nil, nil
}

// stallTimeout is how long a claim with a full read-ahead and no permits
// leaves sarama's channel unread before it pauses the partition and reads
// the channel again (to notice a revoke while the processors are stuck).
const stallTimeout = 100 * time.Millisecond

// run returns when the claim is revoked or its session ends.
//
// Flow control: the claim delivers as many records as it holds permits, and
// keeps at most one window of records taken from sarama but not delivered.
// When that read-ahead is full, it stops reading sarama's channel, so sarama
// stops fetching the partition once its channel (half a window) is full: the
// steady state costs no pause / resume round trips, which would make sarama
// nap for 100ms whenever every partition of a broker is paused. If no permit
// comes back within stallTimeout (the processors are stuck), the claim
// pauses the partition and reads sarama's channel again, so that a revoke
// (which closes the channel) is still noticed; the read-ahead then grows at
// most by what sarama had already fetched.
func (r *reader) run() {
	p := r.p
	window := p.m.stage.Flow().MaxWindow()
	limit := window
	r.qbuf = make([]*sarama.ConsumerMessage, 0, 2*window)
	r.q = r.qbuf
	r.msgs = make([]*message.Message[[]byte], 0, window)
	r.slots = make([]*slot, 0, window)
	sessDone := p.sess.Context().Done()
	drainCh := p.m.drainCh
	draining, stalled := false, false
	stall := time.NewTimer(stallTimeout)
	stall.Stop()
	armed := false
	defer stall.Stop()
	for {
		if draining {
			r.consume(len(r.q))
		} else if len(r.q) > 0 {
			if n := min(int64(len(r.q)), p.permits.Load()); n > 0 {
				p.permits.Add(-n)
				r.deliver(int(n))
			}
		}
		p.readAhead.Store(int32(len(r.q)))
		if stalled && len(r.q) < limit {
			stalled = false
		}
		r.setPaused(draining || (stalled && int64(len(r.q)) >= p.permits.Load()))

		var src <-chan *sarama.ConsumerMessage
		if draining || stalled || len(r.q) < limit {
			src = r.in
			if r.own != nil {
				src = r.own.Messages()
			}
			if armed {
				stall.Stop()
				armed = false
			}
		} else if !armed {
			stall.Reset(stallTimeout)
			armed = true
		}
		var stallC <-chan time.Time
		if armed {
			stallC = stall.C
		}
		select {
		case msg, ok := <-src:
			if !ok {
				if r.own != nil {
					r.log.Warn("kafka redelivery consumer stopped; ending the claim")
				}
				return // revoked, or the session ended
			}
			if !draining {
				r.q = append(r.q, msg)
				r.fill(src, limit)
				msg = r.q[len(r.q)-1]
			}
			p.next.Store(msg.Offset + 1)
		case <-stallC:
			armed = false
			stalled = true
		case msg, ok := <-r.inWhileOwn():
			// While rewound, the claim's own consumer is paused; what it
			// still hands over is fetched again by the rewound one.
			_ = msg
			if !ok {
				return
			}
		case err, ok := <-r.ownErrors:
			if ok {
				r.log.Warn("kafka redelivery consumer error", slog.Any("error", err))
			} else {
				r.ownErrors = nil
			}
		case <-p.grantCh:
		case <-p.retryCh:
			if draining {
				continue
			}
			if !r.redeliver() {
				return
			}
		case <-drainCh:
			draining = true
			drainCh = nil
		case <-sessDone:
			return
		}
	}
}

// inWhileOwn returns the claim's channel while a rewound consumer reads the
// partition (to notice the revoke), nil otherwise.
func (r *reader) inWhileOwn() <-chan *sarama.ConsumerMessage {
	if r.own == nil {
		return nil
	}
	return r.in
}

// fill takes what src already holds, without waiting, up to limit.
func (r *reader) fill(src <-chan *sarama.ConsumerMessage, limit int) {
	for len(r.q) < limit {
		select {
		case msg, ok := <-src:
			if !ok {
				return // seen again by the select in run
			}
			r.q = append(r.q, msg)
		default:
			return
		}
	}
}

// deliver hands the first n queued records to the feed.
func (r *reader) deliver(n int) {
	p := r.p
	recs := r.q[:n]
	// Track the offsets and take the slots in one short critical section
	// (acks of earlier messages take the same lock), before any of them can
	// be acked.
	p.mu.Lock()
	for _, rec := range recs {
		p.cp.Track(uint64(rec.Offset))
	}
	r.slots = p.takeSlots(r.slots[:0], n)
	p.mu.Unlock()
	var hdrs []Header
	r.msgs = r.msgs[:0]
	for i, rec := range recs {
		s := r.slots[i]
		// A slot stays with its claim, so most fields already hold what
		// they should: write only what changes, which keeps the garbage
		// collector's write barriers (taken by every pointer store while
		// it marks) off the rest.
		md := &s.md
		if md.Topic != p.topic || md.Partition != p.part || md.GenerationID != p.generation || md.MemberID != p.memberID {
			md.Topic, md.Partition, md.GenerationID, md.MemberID = p.topic, p.part, p.generation, p.memberID
		}
		md.Offset = rec.Offset
		md.Key = rec.Key
		md.Timestamp = rec.Timestamp
		if md.Headers != nil {
			md.Headers = nil
		}
		if len(rec.Headers) > 0 {
			if hdrs == nil {
				// One array for the headers of this delivery.
				nh := 0
				for _, rec := range recs[i:] {
					nh += len(rec.Headers)
				}
				hdrs = make([]Header, 0, nh)
			}
			start := len(hdrs)
			for _, h := range rec.Headers {
				hdrs = append(hdrs, Header{Key: h.Key, Value: h.Value})
			}
			md.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		if a, _, data := s.msg.Acknowledger(); a == acker.Acknowledger(p) && data == any(s) &&
			s.msg.Metadata == any(md) && s.msg.PartitionKey() == p.key {
			s.msg.Reuse(rec.Value, uint64(rec.Offset))
		} else {
			// A fresh slot (or one a handler changed).
			s.msg.Init(rec.Value, p, uint64(rec.Offset))
			s.msg.SetAckData(s)
			s.msg.Metadata = md
			s.msg.SetPartitionKey(p.key)
		}
		r.msgs = append(r.msgs, &s.msg)
	}
	clear(r.slots)
	p.feed.Deliver(r.msgs...)
	clear(r.msgs)
	r.consume(n)
}

// consume drops the first n queued records. The queue is a window over qbuf
// that moves forward; it goes back to the start of qbuf when it is empty, or
// is copied there once it nears the end of qbuf, so records are not shifted
// on every delivery.
func (r *reader) consume(n int) {
	clear(r.q[:n])
	r.q = r.q[n:]
	switch {
	case len(r.q) == 0:
		r.q = r.qbuf[:0]
	case cap(r.q) < cap(r.qbuf)/2 && len(r.q) <= cap(r.qbuf)/2:
		// Disjoint: r.q starts beyond the first half of qbuf (or is an
		// array of its own after the read-ahead outgrew qbuf).
		k := copy(r.qbuf[:cap(r.qbuf)], r.q)
		clear(r.q)
		r.q = r.qbuf[:k]
	}
}

// withdraw takes the claim's messages that are still in the stage buffer
// back out, forgets their offsets (the claim no longer waits for them, and
// they are fetched again: by the next owner, or by the claim after a rewind)
// and returns their permits to the claim. It reports how many it withdrew.
func (r *reader) withdraw() int {
	p := r.p
	w := p.feed.WithdrawAppend(r.msgs[:0])
	if len(w) == 0 {
		return 0
	}
	_, low, _ := w[0].Acknowledger()
	for _, m := range w[1:] {
		if _, id, _ := m.Acknowledger(); id < low {
			low = id
		}
	}
	n := len(w)
	p.mu.Lock()
	for _, m := range w {
		_, _, data := m.Acknowledger()
		p.recycle(data)
	}
	clear(w)
	r.msgs = w[:0]
	p.cp.Truncate(low)
	if p.cp.Pending() == 0 {
		signal(p.settled)
	}
	p.mu.Unlock()
	p.permits.Add(int64(n))
	return n
}

// redeliver rewinds the partition to the lowest failed offset: what was
// fetched after it is dropped, and after RedeliveryBackoff a consumer of the
// member reads the partition again from there. It reports false when the
// claim ended meanwhile.
func (r *reader) redeliver() bool {
	p := r.p
	p.mu.Lock()
	at := p.retryAt
	p.mu.Unlock()
	if at < 0 {
		return true
	}
	// What was fetched after the failed message is dropped: the read-ahead,
	// and what still waits in the stage buffer.
	r.consume(len(r.q))
	r.withdraw()
	r.closeOwn()
	r.paused = false
	r.setPaused(true)
	r.log.Info("kafka partition rewinds to redeliver a failed message",
		slog.Int64("offset", at), slog.Duration("backoff", p.m.opts.RedeliveryBackoff))
	t := time.NewTimer(p.m.opts.RedeliveryBackoff)
	defer t.Stop()
	sessDone := p.sess.Context().Done()
wait:
	for {
		select {
		case _, ok := <-r.in:
			if !ok {
				return false
			}
		case <-t.C:
			break wait
		case <-sessDone:
			return false
		case <-p.m.drainCh:
			return true // draining: nothing more is delivered anyway
		}
	}
	p.mu.Lock()
	at = p.retryAt
	p.retryAt = -1
	if at >= 0 {
		p.cp.Truncate(uint64(at))
	}
	p.mu.Unlock()
	if at < 0 {
		return true
	}
	pc, err := p.m.consumer.ConsumePartition(p.topic, p.part, at)
	if err != nil {
		r.log.Error("kafka partition cannot be rewound; ending the claim so that the group resumes from the committed offset",
			slog.Int64("offset", at), slog.Any("error", err))
		return false
	}
	r.setOwn(pc)
	return true
}

// setOwn makes pc the consumer the claim reads (the claim's own is
// paused).
func (r *reader) setOwn(pc sarama.PartitionConsumer) {
	r.own, r.ownErrors = pc, pc.Errors()
	r.p.ownPC.Store(&ownConsumer{pc})
	r.paused = false
}

// moveTo makes the claim read from offset at on: the claim's consumer,
// which started elsewhere, is paused and a consumer of the member reads the
// partition instead, as for a redelivery. It reports false when that
// consumer cannot be opened (the claim then ends, and the group rejoins).
func (r *reader) moveTo(at int64) bool {
	r.paused = false
	r.setPaused(true)
	pc, err := r.p.m.consumer.ConsumePartition(r.p.topic, r.p.part, at)
	if err != nil {
		r.log.Error("kafka partition cannot be moved to its start offset; ending the claim so that the group rejoins",
			slog.Int64("offset", at), slog.Any("error", flat(err)))
		return false
	}
	r.setOwn(pc)
	return true
}
