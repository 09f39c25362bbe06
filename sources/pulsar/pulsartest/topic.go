package pulsartest

import (
	"cmp"
	"container/heap"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// entry is one stored ledger entry: the payload section exactly as the
// producer sent it ([magic][crc][metadata size][metadata][payload]), plus
// what dispatch needs from its metadata.
type entry struct {
	data      []byte
	off       int64 // bytes of the topic's entries before this one
	nmsgs     int32
	batched   bool
	key       []byte // routing key for key-shared: ordering key, else partition key
	hash      uint32 // murmur3(key)
	deliverAt int64  // unix ms; 0 = immediately
	published int64  // publish time, unix ms
	// chunk is the message id of a chunked message's entry ("" when not a
	// chunk); lastChunk marks its final chunk.
	chunk     string
	lastChunk bool
}

type topic struct {
	b         *Broker
	name      topicName
	ledger    uint64
	entries   []*entry
	subs      map[string]*subscription
	producers int
	stalled   bool
	size      int64 // bytes of every entry stored
}

// subscription is a cursor over a topic plus the consumers attached to it.
type subscription struct {
	t       *topic
	name    string
	typ     int
	durable bool

	consumers []*consumer // connected, in join order
	history   []*consumer // every consumer ever attached, in join order

	readPos    uint64          // next entry never read by the dispatcher
	markDelete uint64          // every entry below is fully acked
	full       map[uint64]bool // fully acked entries ≥ markDelete
	// partial maps a partly acknowledged batch entry to its indexes still
	// unacknowledged, as an ack_set has them (bit i set: index i
	// unacknowledged; no trailing zero words, never empty).
	partial    map[uint64][]uint64
	pending    map[uint64]*consumer
	unacked    map[uint64]int64 // pending entry → its messages counted in its consumer's unacked
	replay     []uint64         // sorted entries to dispatch before readPos
	redeliver  map[uint64]bool
	redelivery map[uint64]uint32
	delayed    map[uint64]int64 // entry → delivery time (unix ms), for entries in Broker.delayed
	due        bool             // being released (releaseDelayedLocked)
	rr         int
	active     *consumer
	// Shared, as a real broker's round-robin dispatch: readLeft is how many
	// entries of the current read are left to hand out, turn the consumer
	// whose turn it is and turnLeft how many more entries it gets.
	readLeft int64
	turn     *consumer
	turnLeft int64
	// chunkOwner maps a chunked message being dispatched on a Shared
	// subscription to the consumer that got its first chunk.
	chunkOwner map[string]*consumer
	ring       []ringPoint // key-shared auto-split ring, sorted by hash
	// sticky is every connected consumer's sticky hash ranges, sorted and
	// disjoint (SUBSCRIBE refuses a range that overlaps another
	// consumer's), and stickyMode whether any consumer gave ranges.
	sticky     []stickyRange
	stickyMode bool
	holds      map[uint32]*hold // key-shared: key hash → consumer with unacked entries of it
}

// hold records that consumer c has n dispatched, unacked entries of one key
// hash on a key-shared subscription.
type hold struct {
	c *consumer
	n int
}

// unpend forgets that entry id is dispatched (acked, or back for
// redelivery) and releases its key-shared hold.
func (s *subscription) unpend(id uint64) {
	owner, ok := s.pending[id]
	if !ok {
		return
	}
	delete(s.pending, id)
	s.settled(owner, s.unacked[id])
	delete(s.unacked, id)
	if s.holds == nil {
		return
	}
	e := s.t.entries[id]
	if h := s.holds[e.hash]; h != nil {
		if h.n--; h.n <= 0 {
			delete(s.holds, e.hash)
		}
	}
}

// settled takes n messages off c's unacknowledged count, and unblocks c
// once it is down to half the limit (Consumer
// .updateBlockedConsumerOnUnackedMsgs).
func (s *subscription) settled(c *consumer, n int64) {
	c.unacked -= n
	if c.blocked && c.unacked <= int64(s.t.b.opts.MaxUnackedPerConsumer/2) {
		c.blocked = false
	}
}

type consumer struct {
	conn     *conn
	id       uint64
	name     string
	sub      *subscription
	priority int32
	// ranges are the key-shared sticky hash ranges, inclusive, as
	// normalizeRanges leaves them; sticky is set when SUBSCRIBE gave any.
	ranges [][2]int32
	sticky bool

	permits int64
	// unacked counts the messages dispatched to the consumer and not yet
	// acked or back for redelivery; blocked is set when it reached
	// Options.MaxUnackedPerConsumer on a Shared or Key_Shared
	// subscription.
	unacked int64
	blocked bool
	// readLeft is how many more entries the consumer's current read may
	// send (see fits); a read ends with the dispatch pass that began it.
	readLeft int64
	// fullPass is set once the dispatch pass under way found c's
	// connection full; the pass ends by clearing it (dispatch).
	fullPass bool
	notified int8 // last active state notified: -1 none, 0 inactive, 1 active
	st       ConsumerStats
}

// held reports whether c may be sent nothing now, whatever its permits:
// it reached its unacked limit, or its connection's queue is full
// (Options.MaxOutgoingBytes). The connection's writer empties the queue
// without the broker's lock, so within one dispatch pass a connection
// found full stays full: the pass sees each consumer one way, and a
// Key_Shared pass does not park an entry for a consumer that then takes
// the next one. The writer dispatches again once the pass is over.
func (c *consumer) held() bool {
	if c.blocked || c.fullPass {
		return true
	}
	if !c.conn.writable() {
		c.fullPass = true
		return true
	}
	return false
}

// ledgers numbers the topics' ledgers of every broker of the process, from
// the time the process started, in microseconds since 1970: as in a Pulsar
// cluster, whose ledger ids never repeat, a message id names one message
// only, so that an acknowledgement a client still sends for a message of a
// broker that was closed (a broker restarted on the same address, in this
// process or in a new one) never acknowledges another message. A process
// started later numbers from above what an earlier one reached as long as
// the earlier one made fewer ledgers than the microseconds it ran.
var ledgers atomic.Uint64

func init() { ledgers.Store(uint64(time.Now().UnixMicro())) }

func (b *Broker) topicLocked(tn topicName, create bool) *topic {
	t := b.topics[tn.full]
	if t == nil && create {
		t = &topic{b: b, name: tn, ledger: ledgers.Add(1), subs: map[string]*subscription{}, stalled: b.stalled[tn.full]}
		if tn.partition >= 0 && b.stalled[tn.base] {
			t.stalled = true
		}
		b.topics[tn.full] = t
	}
	return t
}

// appendLocked stores one entry and dispatches it.
func (b *Broker) appendLocked(t *topic, data []byte, m entryMeta) uint64 {
	e := &entry{data: data, nmsgs: max(m.numMessages, 1), batched: m.batched, deliverAt: m.deliverAt, published: int64(m.publishTime)}
	if m.numChunks > 1 {
		e.chunk, e.lastChunk = string(m.uuid), m.chunkID == m.numChunks-1
	}
	switch {
	case len(m.orderingKey) > 0:
		e.key = m.orderingKey
	case len(m.keyRaw) > 0:
		e.key = m.keyRaw
	default:
		e.key = noneKey
	}
	e.hash = murmur3(e.key)
	e.off = t.size
	t.size += int64(len(data))
	id := uint64(len(t.entries))
	t.entries = append(t.entries, e)
	for _, s := range t.subs {
		s.dispatch()
	}
	return id
}

// noneKey is the sticky key of an entry whose metadata has neither an
// ordering key nor a partition key: a real broker
// (Commands.peekStickyKey) hashes such entries, batched or not, as
// "NONE_KEY", without looking into a batch's messages.
var noneKey = []byte("NONE_KEY")

func newSubscription(t *topic, name string, typ int, durable bool) *subscription {
	return &subscription{
		t: t, name: name, typ: typ, durable: durable,
		full:       map[uint64]bool{},
		partial:    map[uint64][]uint64{},
		pending:    map[uint64]*consumer{},
		redeliver:  map[uint64]bool{},
		redelivery: map[uint64]uint32{},
		delayed:    map[uint64]int64{},
	}
}

// ---- dispatch ----

// maxReadEntries is how many entries a real broker reads for a consumer at
// once (dispatcherMaxReadBatchSize, default 100).
const maxReadEntries = 100

// fits reports whether c may receive e now. On Exclusive, Failover and
// Key_Shared subscriptions it follows a real Pulsar 4.0 broker's
// dispatchers: while a consumer has permits it reads up to min(permits,
// 100) entries and sends every one of them, each costing its messages
// (minus the indexes already acked), so with batches the permits go
// negative and what is in flight overshoots the permits granted
// (PersistentDispatcherSingleActiveConsumer; on Key_Shared,
// PersistentStickyKeyDispatcherMultipleConsumers.filterAndGroupEntriesForDispatching
// counts a consumer's permits in entries for each read). Shared follows
// its own rule (pickShared). With Options.StrictBatchPermits an entry is
// sent only when the permits cover its messages (or, for a batch larger
// than half the most permits the consumer ever had, as soon as it has any).
func fits(c *consumer, e *entry) bool {
	if c.held() {
		return false
	}
	if !c.sub.t.b.opts.StrictBatchPermits {
		if c.readLeft == 0 {
			if c.permits <= 0 {
				return false
			}
			c.readLeft = min(c.permits, maxReadEntries)
		}
		return true
	}
	need := int64(e.nmsgs)
	return c.permits >= need || (c.permits > 0 && 2*need > c.st.MaxAvailable)
}

func (s *subscription) delays() bool { return s.typ == subShared || s.typ == subKeyShared }

// pick chooses the consumer for entry id, or nil if the right one has no
// room.
func (s *subscription) pick(id uint64, e *entry) *consumer {
	n := len(s.consumers)
	if n == 0 {
		return nil
	}
	switch s.typ {
	case subExclusive, subFailover:
		if s.active != nil && fits(s.active, e) {
			return s.active
		}
		return nil
	case subShared:
		if !s.t.b.opts.StrictBatchPermits {
			return s.pickShared(e)
		}
		for i := range n {
			c := s.consumers[(s.rr+i)%n]
			if fits(c, e) {
				s.rr = (s.rr + i + 1) % n
				return c
			}
		}
		return nil
	default: // key-shared
		c := s.keyOwner(e.hash)
		if c == nil || !fits(c, e) {
			return nil
		}
		if h := s.holds[e.hash]; h != nil && h.c != c {
			// Another consumer still holds unacked entries of this key
			// hash (it owned the key before consumers changed): wait for
			// them, so the key is never processed by two consumers at once.
			return nil
		}
		return c
	}
}

// roundRobinBatch is the most messages a Shared subscription hands one
// consumer in one turn (dispatcherMaxRoundRobinBatchSize, default 20).
const roundRobinBatch = 20

// pickShared chooses the consumer of a Shared subscription for e as a real
// Pulsar 4.0 broker does (PersistentDispatcherMultipleConsumers
// .trySendMessagesToConsumers): the dispatcher reads min(total permits,
// 100) entries at a time and hands them out in turns, round-robin over
// the consumers that have permits; a turn is max(min(permits, 20) / batch
// size, 1) consecutive entries, all sent even if the consumer's permits go
// negative on the way. So a consumer gets runs of up to 20 messages, and
// at most one batch beyond its permits (or its unacked limit). The batch
// size is the turn's first entry's (the broker averages over the read; the
// same for even batches). The read ends with the pass (dispatch), and the
// next starts with the next consumer.
func (s *subscription) pickShared(e *entry) *consumer {
	if e.chunk != "" {
		return s.pickChunk(e)
	}
	return s.pickTurn(e)
}

// pickChunk sends every chunk of a message to the consumer that got its
// first chunk, as a real broker's chunk assignment does
// (PersistentDispatcherMultipleConsumers.sendChunkedMessagesToConsumers),
// waiting for that consumer's permits; the first chunk, or one whose
// consumer has left, takes a turn like any entry.
func (s *subscription) pickChunk(e *entry) *consumer {
	c := s.chunkOwner[e.chunk]
	switch {
	case c != nil && slices.Contains(s.consumers, c):
		if c.permits <= 0 || c.held() {
			return nil
		}
		s.readLeft = max(s.readLeft-1, 0)
	default:
		if c = s.pickTurn(e); c == nil {
			return nil
		}
		if s.chunkOwner == nil {
			s.chunkOwner = map[string]*consumer{}
		}
		s.chunkOwner[e.chunk] = c
	}
	if e.lastChunk {
		delete(s.chunkOwner, e.chunk)
	}
	return c
}

// pickTurn hands e to the consumer whose turn it is (see pickShared).
func (s *subscription) pickTurn(e *entry) *consumer {
	if s.readLeft == 0 {
		// Only whether there are any permits, and up to a read's worth,
		// matters: the sum stops there, so it cannot overflow.
		var total int64
		for _, c := range s.consumers {
			if total < maxReadEntries && !c.held() {
				total += min(max(c.permits, 0), maxReadEntries)
			}
		}
		if total == 0 {
			return nil
		}
		s.readLeft, s.turnLeft = min(total, maxReadEntries), 0
	}
	if s.turnLeft == 0 || s.turn.held() || !slices.Contains(s.consumers, s.turn) {
		n := len(s.consumers)
		s.turn = nil
		for i := range n {
			if c := s.consumers[(s.rr+i)%n]; c.permits > 0 && !c.held() {
				s.turn, s.rr = c, (s.rr+i+1)%n
				break
			}
		}
		if s.turn == nil {
			// No consumer has permits: the rest of the read waits.
			s.readLeft = 0
			return nil
		}
		msgs := min(s.turn.permits, roundRobinBatch)
		if limit := int64(s.t.b.opts.MaxUnackedPerConsumer); limit > 0 {
			// A consumer's turn also stops at its unacked limit.
			msgs = min(msgs, max(limit-s.turn.unacked, 0))
		}
		s.turnLeft = min(max(msgs/max(int64(e.nmsgs), 1), 1), s.readLeft)
	}
	s.turnLeft--
	s.readLeft--
	return s.turn
}

// ringPoints is how many points each consumer has on the key-shared
// consistent-hash ring.
const ringPoints = 100

type ringPoint struct {
	hash uint32
	c    *consumer
}

// rebuildRing recomputes the auto-split consistent-hash ring: each consumer
// owns ringPoints points, so a joining or leaving consumer moves only the
// keys next to its own points.
func (s *subscription) rebuildRing() {
	s.ring = s.ring[:0]
	s.sticky = s.sticky[:0]
	s.stickyMode = false
	if s.typ != subKeyShared {
		return
	}
	for _, c := range s.consumers {
		s.stickyMode = s.stickyMode || c.sticky
		for _, r := range c.ranges {
			s.sticky = append(s.sticky, stickyRange{lo: r[0], hi: r[1], c: c})
		}
	}
	slices.SortFunc(s.sticky, func(a, b stickyRange) int { return cmp.Compare(a.lo, b.lo) })
	var buf []byte
	for _, c := range s.consumers {
		for i := range ringPoints {
			buf = fmt.Appendf(buf[:0], "%s/%d/%d/%d", c.name, c.conn.id, c.id, i)
			s.ring = append(s.ring, ringPoint{murmur3(buf), c})
		}
	}
	slices.SortFunc(s.ring, func(a, b ringPoint) int { return cmp.Compare(a.hash, b.hash) })
}

// stickyRange is one consumer's sticky hash range, inclusive.
type stickyRange struct {
	lo, hi int32
	c      *consumer
}

// stickyAt returns the index in s.sticky of the range that holds h, or -1.
// The ranges are disjoint and sorted, so this is a binary search.
func (s *subscription) stickyAt(h int32) int {
	// i is the first range starting after h: only the one before may hold it.
	i, _ := slices.BinarySearchFunc(s.sticky, h+1, func(r stickyRange, v int32) int { return cmp.Compare(r.lo, v) })
	if i > 0 && s.sticky[i-1].hi >= h {
		return i - 1
	}
	return -1
}

// keyOwner maps a key to its key-shared consumer: with sticky hash ranges
// the consumer whose range holds murmur3(key) mod 65536, else (auto-split)
// the owner of the first ring point at or after murmur3(key).
func (s *subscription) keyOwner(full uint32) *consumer {
	if s.stickyMode {
		if i := s.stickyAt(int32(full % keyHashRange)); i >= 0 {
			return s.sticky[i].c
		}
		return nil
	}
	if len(s.ring) == 0 {
		return nil
	}
	i, _ := slices.BinarySearchFunc(s.ring, full, func(p ringPoint, h uint32) int { return cmp.Compare(p.hash, h) })
	if i == len(s.ring) {
		i = 0
	}
	return s.ring[i].c
}

func (s *subscription) anyPermits() bool {
	for _, c := range s.consumers {
		if c.permits > 0 && !c.held() {
			return true
		}
	}
	return false
}

// dispatch pushes as many entries as permits allow: first the replay list
// (redeliveries, in entry order), then new entries from the read position.
// Each consumer's read ends with the pass.
func (s *subscription) dispatch() {
	s.dispatchPass()
	for _, c := range s.consumers {
		c.readLeft, c.fullPass = 0, false
	}
	s.readLeft, s.turn, s.turnLeft = 0, nil, 0
}

func (s *subscription) dispatchPass() {
	t := s.t
	if t.stalled || len(s.consumers) == 0 {
		return
	}
	keyShared := s.typ == subKeyShared
	// In one pass, once an entry of a key hash is held back every later
	// entry of that hash is too, so a key's entries never overtake.
	var blocked map[uint32]bool
	skip := func(e *entry) bool { return blocked != nil && blocked[e.hash] }
	block := func(e *entry) {
		if blocked == nil {
			blocked = map[uint32]bool{}
		}
		blocked[e.hash] = true
	}
	if len(s.replay) > 0 {
		kept := s.replay[:0]
		stop := false
		for _, id := range s.replay {
			if !stop {
				e := t.entries[id]
				if !keyShared || !skip(e) {
					if c := s.pick(id, e); c != nil {
						s.send(c, id)
						continue
					}
				}
				if !keyShared || !s.anyPermits() {
					stop = true
				} else {
					block(e)
				}
			}
			kept = append(kept, id)
		}
		s.replay = kept
	}
	now := time.Now().UnixMilli()
	for s.readPos < uint64(len(t.entries)) {
		id := s.readPos
		if id < s.markDelete || s.full[id] {
			s.readPos++
			continue
		}
		e := t.entries[id]
		if e.deliverAt > now && s.delays() {
			s.hold(id, e.deliverAt)
			s.readPos++
			continue
		}
		var c *consumer
		if !keyShared || !skip(e) {
			c = s.pick(id, e)
		}
		if c == nil && t.nonPersistent() {
			// A non-persistent topic keeps nothing for a consumer without
			// room: the message is dropped for this subscription, as a
			// real broker's NonPersistentDispatcher drops it.
			s.readPos++
			s.ack(nil, id, ackSet{})
			continue
		}
		if c == nil {
			if keyShared && s.anyPermits() {
				// Keep the key's order: park it in the replay list, which
				// is dispatched first, and serve other keys meanwhile.
				block(e)
				s.replay = append(s.replay, id)
				s.readPos++
				continue
			}
			return
		}
		s.readPos++
		s.send(c, id)
	}
}

func (s *subscription) send(c *consumer, id uint64) {
	e := s.t.entries[id]
	if c.readLeft > 0 {
		c.readLeft--
	}
	s.pending[id] = c
	if s.typ == subKeyShared {
		if s.holds == nil {
			s.holds = map[uint32]*hold{}
		}
		h := s.holds[e.hash]
		if h == nil {
			h = &hold{c: c}
			s.holds[e.hash] = h
		}
		h.n++
	}
	var ackSet []uint64
	live := int64(e.nmsgs)
	if set, ok := s.partial[id]; ok {
		// Sent as stored: the indexes still unacknowledged are the ack_set.
		ackSet, live = set, int64(popcount(set))
	}
	if s.t.b.opts.StrictBatchPermits {
		c.permits -= int64(e.nmsgs)
	} else {
		// A real broker charges the messages it actually sends.
		c.permits -= live
	}
	c.st.Dispatched += live
	if s.unacked == nil {
		s.unacked = map[uint64]int64{}
	}
	s.unacked[id] = live
	c.unacked += live
	if limit := s.t.b.opts.MaxUnackedPerConsumer; limit > 0 && (s.typ == subShared || s.typ == subKeyShared) &&
		c.unacked >= int64(limit) {
		c.blocked = true
	}
	if s.redeliver[id] {
		delete(s.redeliver, id)
		c.st.Redelivered += live
	}
	mid := msgID{ledger: s.t.ledger, entry: id, partition: s.t.name.partition, batchIndex: -1}
	c.conn.sendMessage(c.id, mid, s.redelivery[id], ackSet, e.data)
}

func popcount(ws []uint64) int {
	n := 0
	for _, w := range ws {
		n += bits.OnesCount64(w)
	}
	return n
}

// singleActive reports whether one consumer at a time receives the
// subscription's messages (Exclusive and Failover).
func (s *subscription) singleActive() bool { return s.typ == subExclusive || s.typ == subFailover }

// rewind is what a real broker does on a single-active-consumer
// subscription when the consumer asks for redelivery or the active
// consumer changes (PersistentDispatcherSingleActiveConsumer, which calls
// ManagedCursor.rewind): the read position goes back to the first
// unacknowledged entry, so every dispatched and unacknowledged entry is
// sent again, in order, and individually acknowledged ones are skipped.
// Such dispatchers keep no redelivery counts (their redelivery tracker is
// disabled): the entries come back with a count of 0.
func (s *subscription) rewind() {
	for id, c := range s.pending {
		s.redeliver[id] = true
		s.settled(c, s.unacked[id])
	}
	clear(s.pending)
	clear(s.unacked)
	s.replay = s.replay[:0]
	s.readPos = s.markDelete
	if s.t.nonPersistent() {
		// Nothing to rewind to: what was in flight is gone.
		for id := s.markDelete; id < uint64(len(s.t.entries)); id++ {
			if s.redeliver[id] {
				s.ack(nil, id, ackSet{})
			}
		}
		s.readPos = max(s.readPos, s.markDelete)
	}
}

// retype gives a subscription that has no consumers another type, as a
// real broker replaces the subscription's dispatcher when a consumer of
// another type subscribes. Going from Shared or Key_Shared to Exclusive or
// Failover, the old dispatcher's delayed-delivery tracker goes with it and
// the new single-active dispatcher rewinds the cursor for its first
// consumer and delays nothing: the messages that were held are delivered
// at once, in order with every other unacknowledged one, and only once.
func (s *subscription) retype(typ int) {
	wasDelaying := s.delays()
	s.typ = typ
	if wasDelaying && !s.delays() {
		s.dropDelayed()
		s.rewind()
	}
}

// nonPersistent reports whether t is a non-persistent:// topic.
func (t *topic) nonPersistent() bool { return strings.HasPrefix(t.name.full, "non-persistent://") }

// requeue puts the dispatched entries ids (each one pending, once) back
// for redelivery, raising their redelivery counts if count is set. On a
// non-persistent topic, which never redelivers, it drops them instead. The
// replay list is sorted once for them all, so requeueing n entries costs
// O((n + replayed) log) whatever order they come in.
func (s *subscription) requeue(ids []uint64, count bool) {
	if s.t.nonPersistent() {
		for _, id := range ids {
			s.ack(nil, id, ackSet{})
		}
		return
	}
	for _, id := range ids {
		s.unpend(id)
		if count {
			s.redelivery[id]++
		}
		s.redeliver[id] = true
	}
	if len(ids) == 1 {
		if i, found := slices.BinarySearch(s.replay, ids[0]); !found {
			s.replay = slices.Insert(s.replay, i, ids[0])
		}
		return
	}
	s.replay = append(s.replay, ids...)
	slices.Sort(s.replay)
	s.replay = slices.Compact(s.replay)
}

// live is how many messages of entry id are not acknowledged yet.
func (s *subscription) live(id uint64) int64 {
	if set, ok := s.partial[id]; ok {
		return int64(popcount(set))
	}
	return int64(s.t.entries[id].nmsgs)
}

// ---- acks ----

// ack records an ack of entry id by c. set, when it has words, is the
// client's ack_set for a batch entry (bit set = still unacknowledged). It
// returns the number of messages newly acked.
func (s *subscription) ack(c *consumer, id uint64, set ackSet) int64 {
	t := s.t
	if id >= uint64(len(t.entries)) || id < s.markDelete || s.full[id] {
		return 0
	}
	e := t.entries[id]
	before := s.live(id)
	if set.words > 0 && e.batched {
		if left := s.narrow(id, e, set); left > 0 {
			n := before - left
			if owner := s.pending[id]; owner != nil && s.unacked[id] > 0 {
				d := min(n, s.unacked[id])
				s.unacked[id] -= d
				s.settled(owner, d)
			}
			if c != nil {
				c.st.Acked += n
			}
			return n
		}
	}
	delete(s.partial, id)
	s.full[id] = true
	s.unpend(id)
	delete(s.redeliver, id)
	delete(s.redelivery, id)
	if _, ok := s.delayed[id]; ok {
		delete(s.delayed, id)
		t.b.forgetDelayed(1)
	}
	if i, found := slices.BinarySearch(s.replay, id); found {
		s.replay = slices.Delete(s.replay, i, i+1)
	}
	for s.full[s.markDelete] {
		delete(s.full, s.markDelete)
		s.markDelete++
	}
	if c != nil {
		c.st.Acked += before
	}
	return before
}

// narrow applies the ack_set set to batch entry e (id): the indexes left
// unacknowledged are those that were and that set has set. An index past
// set's last word counts as acknowledged, as in a real broker, which ANDs
// the two bitsets. It keeps the result in s.partial and returns how many
// indexes are left; at 0 it keeps nothing. The work is bounded by the
// shorter of what is kept and set: set's words past the batch's stored
// size are never read, and trailing words with nothing unacknowledged are
// dropped, whatever num_messages or ack_set length the client sent.
func (s *subscription) narrow(id uint64, e *entry, set ackSet) int64 {
	cur, ok := s.partial[id]
	if !ok {
		// Every index was unacknowledged: keep set's words, up to the
		// batch's size.
		words := (int(e.nmsgs) + 63) / 64
		cur = make([]uint64, 0, min(words, set.words))
		set.each(func(i int, w uint64) bool {
			if i >= words {
				return false
			}
			cur = append(cur, w)
			return true
		})
		if r := e.nmsgs % 64; r != 0 && len(cur) == words {
			cur[words-1] &= 1<<r - 1
		}
	} else {
		n := 0
		set.each(func(i int, w uint64) bool {
			if i >= len(cur) {
				return false
			}
			cur[i] &= w
			n = i + 1
			return true
		})
		cur = cur[:n]
	}
	for len(cur) > 0 && cur[len(cur)-1] == 0 {
		cur = cur[:len(cur)-1]
	}
	if len(cur) == 0 {
		delete(s.partial, id)
		return 0
	}
	s.partial[id] = cur
	return int64(popcount(cur))
}

// ---- consumers joining and leaving ----

// failoverReplicas is how many points each consumer name has on the hash
// ring that picks a non-partitioned topic's active failover consumer
// (AbstractDispatcherSingleActiveConsumer.CONSUMER_CONSISTENT_HASH_REPLICAS).
const failoverReplicas = 100

// javaHash is Pulsar's Murmur3_32Hash.makeHash: the 32-bit Murmur3 hash of
// the UTF-8 bytes, with the sign bit cleared.
func javaHash(s string) uint32 { return murmur3([]byte(s)) & 0x7fffffff }

// activeFor returns the consumer that should be active on a failover or
// exclusive subscription, as Pulsar 4.0's
// AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer
// does: the consumers are sorted by priority level, then by name (ties keep
// their join order), and only the highest-priority ones compete. For
// partition i of a partitioned topic the (i mod n)-th of them is active.
// For a non-partitioned topic (since Pulsar 3.0) each name puts 100 points
// (the hash of name+j, j = 0..99) on a ring, a later consumer's point
// replacing an earlier one's on a collision, and the consumer owning the
// first point at or after the hash of the topic name is active: so with
// identical names the later joiner wins.
func (s *subscription) activeFor() *consumer {
	if len(s.consumers) == 0 {
		return nil
	}
	best := s.consumers[0].priority
	for _, c := range s.consumers {
		best = min(best, c.priority)
	}
	var group []*consumer
	for _, c := range s.consumers {
		if c.priority == best {
			group = append(group, c)
		}
	}
	slices.SortStableFunc(group, func(a, b *consumer) int { return cmp.Compare(a.name, b.name) })
	if p := s.t.name.partition; p >= 0 {
		return group[int(p)%len(group)]
	}
	ring := make(map[uint32]int, len(group)*failoverReplicas)
	for i, c := range group {
		for j := range failoverReplicas {
			ring[javaHash(c.name+strconv.Itoa(j))] = i
		}
	}
	target := javaHash(s.t.name.full)
	var (
		ceil, lowest    uint32
		hasCeil, hasLow bool
		ceilIdx, lowIdx int
	)
	for h, i := range ring {
		if h >= target && (!hasCeil || h < ceil) {
			ceil, ceilIdx, hasCeil = h, i, true
		}
		if !hasLow || h < lowest {
			lowest, lowIdx, hasLow = h, i, true
		}
	}
	if hasCeil {
		return group[ceilIdx]
	}
	return group[lowIdx]
}

// updateActive re-elects the active consumer; on a change the previous
// active consumer's unacked entries are rewound to the new one, and
// consumers whose state changed are told.
func (s *subscription) updateActive() {
	if s.typ != subFailover && s.typ != subExclusive {
		return
	}
	next := s.activeFor()
	if next != s.active {
		if s.active != nil {
			s.rewind()
		}
		s.active = next
	}
	if s.typ == subFailover {
		for _, c := range s.consumers {
			s.notify(c)
		}
	}
}

// notify sends c its active state if it changed since last told. The
// first notice goes out while c subscribes, before the SUCCESS response,
// as a real broker sends it.
func (s *subscription) notify(c *consumer) {
	if s.typ != subFailover {
		return
	}
	state := int8(0)
	if s.active == c {
		state = 1
	}
	if c.notified != state {
		c.notified = state
		c.conn.sendActiveChange(c.id, state == 1)
	}
}

// removeConsumer detaches c; its unacked entries go back for redelivery to
// the remaining consumers (without raising their redelivery count, as
// Pulsar does).
func (b *Broker) removeConsumerLocked(c *consumer) {
	s := c.sub
	i := slices.Index(s.consumers, c)
	if i < 0 {
		return
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	s.rebuildRing()
	c.st.Connected = false
	delete(c.conn.consumers, c.id)
	if len(s.consumers) > 0 {
		s.rr %= len(s.consumers)
	} else {
		s.rr = 0
	}
	if s.singleActive() {
		if s.active == c {
			s.rewind()
		}
	} else {
		var ids []uint64
		for id, pc := range s.pending {
			if pc == c {
				ids = append(ids, id)
			}
		}
		s.requeue(ids, false)
	}
	if s.active == c {
		s.active = nil
	}
	if len(s.consumers) == 0 && !s.singleActive() {
		// A real broker forgets redelivery counts when the last consumer
		// of a Shared or Key_Shared subscription leaves
		// (PersistentDispatcherMultipleConsumers.removeConsumer clears its
		// redelivery tracker), so the next consumer starts them at 0.
		clear(s.redelivery)
	}
	s.updateActive()
	if len(s.consumers) == 0 && !s.durable {
		s.dropDelayed()
		delete(s.t.subs, s.name)
		return
	}
	s.dispatch()
}

func (b *Broker) removeConnLocked(c *conn) {
	if c.removed {
		return
	}
	c.removed = true
	delete(b.conns, c)
	for _, p := range c.producers {
		p.topic.producers--
	}
	clear(c.producers)
	cs := make([]*consumer, 0, len(c.consumers))
	for _, cons := range c.consumers {
		cs = append(cs, cons)
	}
	slices.SortFunc(cs, func(x, y *consumer) int { return cmp.Compare(x.id, y.id) })
	for _, cons := range cs {
		b.removeConsumerLocked(cons)
	}
}

// delayedItem is an entry of a subscription held until its delivery time
// (unix ms).
type delayedItem struct {
	at int64
	s  *subscription
	id uint64
}

// delayedHeap is a min-heap of delayedItem by time, then entry. An item
// is live while its subscription's delayed map has the entry with that
// time; the others are stale (the entry was acknowledged, or its
// subscription sought, changed type or went away) and are dropped when
// they reach the top. Broker.delayedStale counts them: an item becomes
// stale when its map entry is deleted by anything but its release, and
// once more than half of the heap is stale it is rebuilt from the maps.
// Items are added and taken with heap.Fix, which boxes nothing: Push and
// Pop are there for heap.Interface.
type delayedHeap []delayedItem

func (h delayedHeap) Len() int { return len(h) }
func (h delayedHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].id < h[j].id
}
func (h delayedHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *delayedHeap) Push(x any)   { *h = append(*h, x.(delayedItem)) }
func (h *delayedHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// push adds it to the heap.
func (h *delayedHeap) push(it delayedItem) {
	*h = append(*h, it)
	heap.Fix(h, len(*h)-1)
}

// pop removes and returns the earliest item; the heap must not be empty.
func (h *delayedHeap) pop() delayedItem {
	old := *h
	top, n := old[0], len(old)-1
	old[0] = old[n]
	old[n] = delayedItem{}
	*h = old[:n]
	if n > 0 {
		heap.Fix(h, 0)
	}
	return top
}

// hold keeps entry id, due at (unix ms), from dispatch until then, and
// wakes the timer goroutine if it is due before the time it waits for.
func (s *subscription) hold(id uint64, at int64) {
	if _, ok := s.delayed[id]; ok {
		return
	}
	s.delayed[id] = at
	b := s.t.b
	b.delayed.push(delayedItem{at: at, s: s, id: id})
	if b.nextWake == 0 || at < b.nextWake {
		b.kickTimer()
	}
}

// dropDelayed forgets every entry the subscription holds for delayed
// delivery.
func (s *subscription) dropDelayed() {
	n := len(s.delayed)
	clear(s.delayed)
	s.t.b.forgetDelayed(n)
}

// forgetDelayed counts n heap items made stale (their map entries already
// deleted), and rebuilds the heap from the subscriptions' delayed maps
// once they are more than half of it (and more than 64), so that the heap
// holds at most about twice the entries held.
func (b *Broker) forgetDelayed(n int) {
	b.delayedStale += n
	if b.delayedStale <= 64 || 2*b.delayedStale <= len(b.delayed) {
		return
	}
	clear(b.delayed)
	b.delayed = b.delayed[:0]
	for _, t := range b.topics {
		for _, s := range t.subs {
			for id, at := range s.delayed {
				b.delayed = append(b.delayed, delayedItem{at: at, s: s, id: id})
			}
		}
	}
	heap.Init(&b.delayed)
	b.delayedStale = 0
}

// releaseDelayedLocked moves the entries due by now to their
// subscriptions' replay lists, dispatches those subscriptions and returns
// the next due time (zero if none). Its work is in the entries due (and
// stale items reaching the top), not in the entries held.
func (b *Broker) releaseDelayedLocked(now time.Time) time.Time {
	nowMs := now.UnixMilli()
	touched := b.released[:0]
	for len(b.delayed) > 0 && b.delayed[0].at <= nowMs {
		it := b.delayed.pop()
		s := it.s
		if at, ok := s.delayed[it.id]; !ok || at != it.at {
			b.delayedStale--
			continue
		}
		delete(s.delayed, it.id)
		if i, found := slices.BinarySearch(s.replay, it.id); !found {
			s.replay = slices.Insert(s.replay, i, it.id)
		}
		if !s.due {
			s.due = true
			touched = append(touched, s)
		}
	}
	for i, s := range touched {
		s.due = false
		s.dispatch()
		touched[i] = nil
	}
	b.released = touched[:0]
	if len(b.delayed) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(b.delayed[0].at)
}
