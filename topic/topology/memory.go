package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// DefaultMemoryCapacity is the default MemoryOptions.Capacity.
const DefaultMemoryCapacity = 4096

// DefaultMemoryHoldCapacity is the default MemoryOptions.HoldCapacity.
const DefaultMemoryHoldCapacity = 1 << 16

// MaxMemoryHoldCapacity is the largest MemoryOptions.HoldCapacity.
const MaxMemoryHoldCapacity = 1 << 24

// MaxMemoryCapacity is the largest MemoryOptions.Capacity.
const MaxMemoryCapacity = 1 << 20

// MemoryOptions configure a [Memory] backend.
type MemoryOptions struct {
	// Capacity is how many letters each consumer group's queue and each DLQ
	// holds (1 to 1048576, its slots allocated as letters come in). A publish
	// waits while the queue it goes to is full. A letter that goes back to
	// the queue it was received from (a hold's release, a retry requeued,
	// a dead letter put back) never waits and is never refused: it goes
	// in over the capacity, publishers waiting meanwhile. Any other
	// requeue or dead-lettering never waits either: the letter waits for
	// room behind the queue instead, in order, and up to Capacity letters
	// may wait so behind each queue; past that they fail with ErrFull.
	// 1 to MaxMemoryCapacity (1048576); default DefaultMemoryCapacity.
	Capacity int `validate:"gte=1,lte=1048576"`
	// HoldCapacity is how many letters each hold queue holds (1 to
	// MaxMemoryHoldCapacity, allocated as letters come in). A Hold into a
	// hold queue that holds as many fails at once with ErrFull; a
	// [Source] keeps such a letter and hands it off again once there is
	// room (see Source). Default DefaultMemoryHoldCapacity.
	HoldCapacity int `validate:"gte=1,lte=16777216"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o MemoryOptions) WithDefaults() MemoryOptions {
	if o.Capacity == 0 {
		o.Capacity = DefaultMemoryCapacity
	}
	if o.HoldCapacity == 0 {
		o.HoldCapacity = DefaultMemoryHoldCapacity
	}
	return o
}

// Validate checks o (after WithDefaults) and returns nil or a
// validate.Errors naming every broken rule ("memory.capacity must be ≥ 1").
func (o MemoryOptions) Validate() error { return validate.Struct("memory", &o) }

// Memory is the in-memory topology backend. Each topic (a main topic or a
// DLQ) is a set of bounded queues, one per consumer group, created when a
// topology declares the group and kept until Close whether or not a
// consumer is connected, so nothing published or dead-lettered in between
// is lost. A hold queue is a timed queue of at most HoldCapacity letters:
// one goroutine per hold queue, a timer set for its earliest due letter,
// no goroutine or timer per letter. A letter going back to the queue it
// was received from (a hold's release, a retry requeued, a dead letter
// put back) goes in at once, over the queue's capacity if need be: the
// queue held it already, so it goes over by no more than the letters
// taken from it and not settled (in flight, in hold queues, kept by a
// source), and a queue that only its own readers drain never waits on
// itself. Any other letter requeued or dead-lettered into a full queue
// waits for room behind it, in order, moved in by one goroutine per
// queue while any wait, so a source's acknowledgement never waits for
// room. Memory is therefore bounded by the options: Capacity per queue
// and as many waiting behind it, HoldCapacity per hold queue, and what
// sources and pipelines hold in flight. Nothing survives the process.
//
// Create it with NewMemory and Close it when done. It is safe for
// concurrent use. A Memory NewMemory did not make (a zero value) holds
// nothing: its Declare returns an error wrapping topic.ErrNotCreated, and
// its Close returns nil.
type Memory[T any] struct {
	capacity     int
	holdCapacity int

	mu       sync.Mutex
	closed   bool
	shut     chan struct{} // closed once Close has closed everything
	topics   map[string]*memTopic[T]
	holds    map[string]*holdQueue[T]
	backlogs map[*queue.Queue[Letter[T]]]*backlog[T]
	ctx      context.Context // done once Close starts: stops the hold queues and backlogs
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// ErrFull is returned, wrapped, by the in-memory backend's Hold when the
// hold queue holds MemoryOptions.HoldCapacity letters, and by its Requeue
// and DeadLetter when the queue the letter goes to is full and as many
// letters as it holds (MemoryOptions.Capacity) already wait for room
// behind it. The backend then keeps nothing: the letter stays the
// caller's. A [Source] keeps it and hands it off again once there is
// room, taking no new letters meanwhile (see Source).
var ErrFull = errors.New("topology: queue full")

// errZeroMemory is what Declare returns on a Memory NewMemory did not make.
var errZeroMemory = fmt.Errorf("topology: zero Memory (make one with NewMemory): %w", topic.ErrNotCreated)

// NewMemory returns an empty in-memory backend, or the validate.Errors of
// opts.
func NewMemory[T any](opts MemoryOptions) (*Memory[T], error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Memory[T]{
		capacity:     opts.Capacity,
		holdCapacity: opts.HoldCapacity,
		topics:       map[string]*memTopic[T]{},
		holds:        map[string]*holdQueue[T]{},
		backlogs:     map[*queue.Queue[Letter[T]]]*backlog[T]{},
		ctx:          ctx,
		cancel:       cancel,
	}, nil
}

// Name returns "in_memory".
func (m *Memory[T]) Name() string { return "in_memory" }

// deadGroup is the one consumer group of a DLQ topic.
const deadGroup = "dead"

// Declare creates, if they do not exist yet, the main topic with the
// topology's consumer group, its hold queues and its DLQ. It never fails
// for a built topology, except with ErrClosed. A nil ctx returns
// ErrNilContext, nothing declared.
func (m *Memory[T]) Declare(ctx context.Context, t *Topology) (Queues[T], error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if t == nil {
		return nil, errors.New("topology: Declare with a nil topology")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.topics == nil {
		return nil, errZeroMemory
	}
	q := &memQueues[T]{m: m, t: t, main: m.topicLocked(t.name)}
	if !t.broadcast {
		q.group = q.main.group(t.ConsumerGroup(), m.capacity)
		q.requeue = m.backlogLocked(q.group, "group "+strconv.Quote(t.ConsumerGroup())+" of "+strconv.Quote(t.name))
	}
	for _, h := range t.holds {
		hq := m.holds[h.Name]
		if hq == nil {
			hq = &holdQueue[T]{name: h.Name, delay: h.Delay, limit: m.holdCapacity, wake: make(chan struct{}, 1), ctx: m.ctx}
			m.holds[h.Name] = hq
			m.wg.Go(hq.run)
		}
		q.holds = append(q.holds, hq)
	}
	if t.dlq != "" {
		q.dead = m.topicLocked(t.dlq).group(deadGroup, m.capacity)
		q.deadBacklog = m.backlogLocked(q.dead, "DLQ "+strconv.Quote(t.dlq))
	}
	return q, nil
}

// backlogLocked returns the backlog of g, made on first use; name names g
// in errors.
func (m *Memory[T]) backlogLocked(g *queue.Queue[Letter[T]], name string) *backlog[T] {
	b := m.backlogs[g]
	if b == nil {
		b = &backlog[T]{m: m, target: g, name: name, limit: m.capacity}
		m.backlogs[g] = b
	}
	return b
}

// spawn runs f on a goroutine that Close waits for; false once the backend
// is closed (f is then not run).
func (m *Memory[T]) spawn(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Go(f)
	return true
}

// isClosed reports whether Close was called.
func (m *Memory[T]) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (m *Memory[T]) topicLocked(name string) *memTopic[T] {
	tp := m.topics[name]
	if tp == nil {
		tp = &memTopic[T]{name: name, groups: map[string]*queue.Queue[Letter[T]]{}}
		m.topics[name] = tp
	}
	return tp
}

// Close stops the hold queues and the backlogs (the letters they hold, or
// that wait for room in a queue, are lost, as everything else in memory),
// closes every queue (readers not closed themselves receive what is left,
// then ErrClosed) and waits for the hold queues' and the backlogs'
// goroutines. Nothing it does
// waits on anything else: those goroutines return as soon as the backend's
// closing is signalled, so Close completes and returns nil whatever ctx,
// even one already done (ctx is there for the Backend contract). From
// then on every operation of the queues it declared returns ErrClosed.
// Idempotent: a later call, or one made at the same time, returns once
// the first has closed everything. A nil ctx returns ErrNilContext and
// leaves the backend as it was, open: call Close again with a context.
func (m *Memory[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	m.mu.Lock()
	if m.cancel == nil { // a zero Memory: nothing to close
		m.mu.Unlock()
		return nil
	}
	if m.closed {
		m.mu.Unlock()
		<-m.shut
		return nil
	}
	m.closed = true
	m.shut = make(chan struct{})
	defer close(m.shut)
	m.cancel()
	topics := m.topics
	m.mu.Unlock()
	for _, tp := range topics {
		tp.close()
	}
	m.wg.Wait()
	return nil
}

// Held returns how many letters the hold queue called name holds (0 for an
// unknown name).
func (m *Memory[T]) Held(name string) int {
	m.mu.Lock()
	hq := m.holds[name]
	m.mu.Unlock()
	if hq == nil {
		return 0
	}
	hq.mu.Lock()
	defer hq.mu.Unlock()
	return len(hq.items) - hq.head
}

// Queued returns how many letters the consumer group's queue of the topic
// called name holds, the letters waiting for room in it included (for a
// DLQ, group is ignored).
func (m *Memory[T]) Queued(name, group string) int {
	m.mu.Lock()
	tp := m.topics[name]
	m.mu.Unlock()
	if tp == nil {
		return 0
	}
	tp.mu.Lock()
	g := tp.groups[deadGroup]
	if g == nil {
		g = tp.groups[group]
	}
	tp.mu.Unlock()
	if g == nil {
		return 0
	}
	m.mu.Lock()
	b := m.backlogs[g]
	m.mu.Unlock()
	n := g.Len()
	if b != nil {
		n += b.len()
	}
	return n
}

// memTopic is a main topic or a DLQ: one queue per consumer group.
type memTopic[T any] struct {
	name      string
	mu        sync.Mutex
	closed    bool
	groups    map[string]*queue.Queue[Letter[T]]
	ephemeral atomic.Uint64
}

func (tp *memTopic[T]) group(name string, capacity int) *queue.Queue[Letter[T]] {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	g := tp.groups[name]
	if g == nil {
		g = queue.New[Letter[T]](capacity)
		if tp.closed {
			g.Close()
		}
		tp.groups[name] = g
	}
	return g
}

func (tp *memTopic[T]) remove(name string) {
	tp.mu.Lock()
	g := tp.groups[name]
	delete(tp.groups, name)
	tp.mu.Unlock()
	if g != nil {
		g.Close()
	}
}

func (tp *memTopic[T]) publish(ctx context.Context, l Letter[T]) error {
	tp.mu.Lock()
	if tp.closed {
		tp.mu.Unlock()
		return ErrClosed
	}
	gs := make([]*queue.Queue[Letter[T]], 0, len(tp.groups))
	for _, g := range tp.groups {
		gs = append(gs, g)
	}
	tp.mu.Unlock()
	for _, g := range gs {
		if err := put(ctx, g, l); err != nil {
			if errors.Is(err, ErrClosed) && !tp.isClosed() {
				continue // an ephemeral group removed since the snapshot
			}
			return mapQueueErr(err)
		}
	}
	return nil
}

func (tp *memTopic[T]) isClosed() bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.closed
}

func (tp *memTopic[T]) close() {
	tp.mu.Lock()
	tp.closed = true
	for _, g := range tp.groups {
		g.Close()
	}
	tp.mu.Unlock()
}

// put appends l to g, waiting for room only when there is none: ctx bounds
// the wait, so an append that needs no wait succeeds even with ctx done (a
// source settles outcomes with a context its pipeline cancels when a drain
// is cut short).
func put[T any](ctx context.Context, g *queue.Queue[Letter[T]], l Letter[T]) error {
	ok, err := g.TryPublish(l)
	if err != nil || ok {
		return mapQueueErr(err)
	}
	return mapQueueErr(g.Publish(ctx, l))
}

func mapQueueErr(err error) error {
	if errors.Is(err, queue.ErrClosed) || errors.Is(err, queue.ErrDrained) {
		return ErrClosed
	}
	return err
}

// memQueues are the queues of one declared topology.
type memQueues[T any] struct {
	m           *Memory[T]
	t           *Topology
	main        *memTopic[T]
	group       *queue.Queue[Letter[T]] // nil for broadcast
	requeue     *backlog[T]             // group's; nil for broadcast
	holds       []*holdQueue[T]
	dead        *queue.Queue[Letter[T]] // nil without DLQ
	deadBacklog *backlog[T]             // dead's; nil without DLQ
}

// Topology implements Queues.
func (q *memQueues[T]) Topology() *Topology { return q.t }

// Publish implements Queues: every group's queue gets l, waiting for room
// in each, one after the other. When ctx ends while it waits for a
// group, the groups before it keep l. A nil ctx returns ErrNilContext,
// nothing published. l's Headers are copied (without the reserved
// names), so that the caller's map is not shared with the readers.
func (q *memQueues[T]) Publish(ctx context.Context, l Letter[T]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if err := CheckHeaders(l.Headers); err != nil {
		return err
	}
	l.Receipt, l.Resume = nil, false
	l.Headers = maps.Clone(CarriedHeaders(l.Headers))
	return q.main.publish(ctx, l)
}

// Subscribe implements Queues: a reader of the group's queue, or of a new
// ephemeral group for a broadcast topology. A nil ctx returns
// ErrNilContext.
func (q *memQueues[T]) Subscribe(ctx context.Context) (Reader[T], error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.m.isClosed() {
		return nil, ErrClosed
	}
	if q.group == nil {
		name := "broadcast-" + strconv.FormatUint(q.main.ephemeral.Add(1), 10)
		g := q.main.group(name, q.m.capacity)
		return newMemReader(g, func() { q.main.remove(name) }), nil
	}
	return newMemReader(q.group, nil), nil
}

// Hold implements Queues. A nil ctx returns ErrNilContext, nothing held.
func (q *memQueues[T]) Hold(ctx context.Context, i int, l Letter[T]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if i < 0 || i >= len(q.holds) {
		return fmt.Errorf("topology: hold queue %d of %d", i, len(q.holds))
	}
	l.Headers = CarriedHeaders(l.Headers)
	return q.holds[i].add(ctx, l, q.group)
}

// Requeue implements Queues: l goes to the tail of the group's queue. It
// never waits. A letter received from the group's queue (a retry) goes
// in at once, over the queue's capacity if need be (see Memory); any
// other (a replayed dead letter) waits for room behind a full queue,
// after the others waiting (ErrFull when Capacity letters wait already).
// A nil ctx returns ErrNilContext, nothing requeued.
func (q *memQueues[T]) Requeue(ctx context.Context, l Letter[T]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if q.group == nil {
		return errors.New("topology: a broadcast topology cannot requeue")
	}
	from := l.Receipt
	l.Receipt = nil
	l.Headers = CarriedHeaders(l.Headers)
	if g, ok := from.(*queue.Queue[Letter[T]]); ok && g == q.group {
		one := [1]Letter[T]{l}
		return mapQueueErr(q.group.PutTail(one[:]))
	}
	return q.requeue.put(l)
}

// Return implements Queues: ls go back to the head of the queue they were
// received from (the group's queue, or the DLQ for the letters of a
// reader from SubscribeDead), in order, ahead of every letter queued. It
// never waits: a full queue goes over its capacity by the letters it
// takes back until its readers have taken it back below (publishers
// wait meanwhile).
func (q *memQueues[T]) Return(_ context.Context, ls []Letter[T]) error {
	if q.group == nil {
		return errors.New("topology: a broadcast topology cannot return letters")
	}
	fromDLQ := func(l *Letter[T]) bool {
		g, ok := l.Receipt.(*queue.Queue[Letter[T]])
		return ok && g != nil && g == q.dead
	}
	var dead []Letter[T]
	if slices.ContainsFunc(ls, func(l Letter[T]) bool { return fromDLQ(&l) }) {
		// Split, keeping the order of each part.
		var group []Letter[T]
		for i := range ls {
			if fromDLQ(&ls[i]) {
				dead = append(dead, ls[i])
			} else {
				group = append(group, ls[i])
			}
		}
		ls = group
	}
	var errs []error
	for _, back := range []struct {
		to *queue.Queue[Letter[T]]
		ls []Letter[T]
	}{{q.group, ls}, {q.dead, dead}} {
		if len(back.ls) == 0 {
			continue
		}
		for i := range back.ls {
			back.ls[i].Receipt = nil
		}
		errs = append(errs, mapQueueErr(back.to.PutFront(back.ls)))
	}
	return errors.Join(errs...)
}

// DeadLetter implements Queues. It never waits. A letter received from
// the DLQ (put back by a dead source or Replay) goes in at once, over
// the DLQ's capacity if need be (see Memory); any other waits for room
// behind a full DLQ, after the letters dead-lettered before it (ErrFull
// when Capacity letters wait already). A nil ctx returns ErrNilContext,
// nothing dead-lettered.
func (q *memQueues[T]) DeadLetter(ctx context.Context, l Letter[T]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if q.dead == nil {
		return ErrNoDLQ
	}
	from := l.Receipt
	l.Receipt, l.Resume = nil, false
	l.Headers = CarriedHeaders(l.Headers)
	if g, ok := from.(*queue.Queue[Letter[T]]); ok && g == q.dead {
		one := [1]Letter[T]{l}
		return mapQueueErr(q.dead.PutTail(one[:]))
	}
	return q.deadBacklog.put(l)
}

// deadHeld is the letters the DLQ holds, those waiting for room behind
// it included.
func (q *memQueues[T]) deadHeld() int { return q.dead.Len() + q.deadBacklog.len() }

// SubscribeDead implements Queues. A nil ctx returns ErrNilContext.
func (q *memQueues[T]) SubscribeDead(ctx context.Context) (Reader[T], error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if q.dead == nil {
		return nil, ErrNoDLQ
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.m.isClosed() {
		return nil, ErrClosed
	}
	return &memDeadReader[T]{memReader: newMemReader(q.dead, nil), held: q.deadHeld, left: -1}, nil
}

// memDeadReader is a DLQ's reader: a memReader that can pin its end
// (topology.EndPinner) to the letters the DLQ holds.
type memDeadReader[T any] struct {
	*memReader[T]
	held func() int // the letters the DLQ holds

	mu   sync.Mutex
	left int // the letters left to deliver up to the pinned end; -1: not pinned
}

var _ EndPinner = (*memDeadReader[int])(nil)

// PinEnd implements EndPinner: the reader delivers no more letters than
// the DLQ holds now, those waiting for room behind it included, which
// reach it first in order. A nil ctx returns ErrNilContext; it does not
// wait otherwise.
func (r *memDeadReader[T]) PinEnd(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	select {
	case <-r.stop:
		return ErrClosed
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left < 0 {
		r.left = r.held()
	}
	return nil
}

// within returns dst cut to the letters left up to the pinned end, and
// whether the end is reached.
func (r *memDeadReader[T]) within(dst []Letter[T]) ([]Letter[T], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left >= 0 && r.left < len(dst) {
		dst = dst[:r.left]
	}
	return dst, r.left == 0
}

// delivered counts n letters delivered towards the pinned end.
func (r *memDeadReader[T]) delivered(n int) {
	r.mu.Lock()
	if r.left > 0 {
		r.left -= n
	}
	r.mu.Unlock()
}

// Receive implements Reader; once the pinned end is reached it waits for
// ctx or Close.
func (r *memDeadReader[T]) Receive(ctx context.Context, dst []Letter[T]) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	return r.receive(dst, func(dst []Letter[T]) (int, error) { return r.memReader.Receive(ctx, dst) }, func() error {
		select {
		case <-r.stop:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// TryReceive implements Reader; once the pinned end is reached it
// returns 0, nil.
func (r *memDeadReader[T]) TryReceive(ctx context.Context, dst []Letter[T]) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	return r.receive(dst, func(dst []Letter[T]) (int, error) { return r.memReader.TryReceive(ctx, dst) }, func() error {
		select {
		case <-r.stop:
			return ErrClosed
		default:
			return nil
		}
	})
}

// receive receives into dst with recv, up to the pinned end; once that
// is reached it returns 0 and what atEnd returns, receiving nothing.
func (r *memDeadReader[T]) receive(dst []Letter[T], recv func([]Letter[T]) (int, error), atEnd func() error) (int, error) {
	if len(dst) == 0 {
		return 0, ErrEmptyDst
	}
	dst, end := r.within(dst)
	if end {
		return 0, atEnd()
	}
	n, err := recv(dst)
	r.delivered(n)
	return n, err
}

// memReader reads one group queue (a DLQ's reader, its one group's).
// Each letter it hands out carries that queue as Receipt, so that Return
// puts the letter back where it came from, and Requeue and DeadLetter
// know a letter that goes back to the queue it came from (a retry, a
// dead letter put back), which never waits and is never refused.
type memReader[T any] struct {
	q       *queue.Queue[Letter[T]]
	stop    chan time.Time // closed by Close: wakes a waiting Receive
	once    sync.Once
	onClose func()
}

func newMemReader[T any](q *queue.Queue[Letter[T]], onClose func()) *memReader[T] {
	return &memReader[T]{q: q, stop: make(chan time.Time), onClose: onClose}
}

// mark gives the letters r hands out their queue as Receipt.
func (r *memReader[T]) mark(ls []Letter[T]) {
	for i := range ls {
		ls[i].Receipt = r.q
	}
}

// Receive implements Reader. A nil ctx returns ErrNilContext, nothing
// received. A closed reader returns ErrClosed, even with
// letters queued, as TryReceive does: they stay for the group's other
// readers.
func (r *memReader[T]) Receive(ctx context.Context, dst []Letter[T]) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	if len(dst) == 0 {
		return 0, ErrEmptyDst
	}
	select {
	case <-r.stop:
		return 0, ErrClosed
	default:
	}
	n, err := r.q.ReceiveOr(ctx, dst, r.stop)
	if n == 0 && err == nil {
		return 0, ErrClosed
	}
	if err != nil {
		return 0, mapQueueErr(err)
	}
	r.mark(dst[:n])
	return n, nil
}

// TryReceive implements Reader. It never waits, and ignores ctx but for a
// nil one, which returns ErrNilContext, nothing received.
func (r *memReader[T]) TryReceive(ctx context.Context, dst []Letter[T]) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	if len(dst) == 0 {
		return 0, ErrEmptyDst
	}
	select {
	case <-r.stop:
		return 0, ErrClosed
	default:
	}
	n, err := r.q.TryReceive(dst)
	r.mark(dst[:n])
	return n, mapQueueErr(err)
}

// Settle does nothing: a letter leaves the in-memory queue when received.
func (r *memReader[T]) Settle(context.Context, *Letter[T]) error { return nil }

// Close implements Reader: it wakes a waiting Receive and removes an
// ephemeral group. It never waits, and returns nil whatever ctx but a nil
// one, which returns ErrNilContext and leaves the reader open: call Close
// again with a context.
func (r *memReader[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	r.once.Do(func() {
		close(r.stop)
		if r.onClose != nil {
			r.onClose()
		}
	})
	return nil
}

// holdQueue is a timed queue. Every letter in it waits the same delay, so
// letters fall due in the order they were added: the queue is a FIFO whose
// head is always the earliest due, and one timer, set for the head, is all
// it needs. Each letter goes back to the group queue that held it: two
// topologies whose derived hold names meet ("x" for group "g", and "x.g")
// share the hold queue, never each other's retries.
type holdQueue[T any] struct {
	name  string
	delay time.Duration
	limit int // the most letters it holds (MemoryOptions.HoldCapacity)
	wake  chan struct{}
	ctx   context.Context // the backend's: done when it closes

	mu    sync.Mutex
	items []held[T]
	head  int
}

type held[T any] struct {
	due    time.Time
	l      Letter[T]
	target *queue.Queue[Letter[T]]
}

func (h *holdQueue[T]) add(_ context.Context, l Letter[T], target *queue.Queue[Letter[T]]) error {
	if h.ctx.Err() != nil {
		return ErrClosed
	}
	l.Receipt = nil
	h.mu.Lock()
	if len(h.items)-h.head >= h.limit {
		h.mu.Unlock()
		return fmt.Errorf("topology: hold queue %s: %w: it holds %d letters", strconv.Quote(h.name), ErrFull, h.limit)
	}
	h.items = append(h.items, held[T]{due: time.Now().Add(h.delay), l: l, target: target})
	first := len(h.items)-h.head == 1
	h.mu.Unlock()
	if first {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// run releases letters when they fall due, until the backend closes.
func (h *holdQueue[T]) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due []held[T]
	var one [1]Letter[T]
	for {
		h.mu.Lock()
		now := time.Now()
		for h.head < len(h.items) && !h.items[h.head].due.After(now) {
			due = append(due, h.items[h.head])
			h.items[h.head] = held[T]{}
			h.head++
		}
		if h.head == len(h.items) {
			h.items, h.head = h.items[:0], 0
		} else if h.head > len(h.items)/2 && h.head > 64 {
			n := copy(h.items, h.items[h.head:])
			clear(h.items[n:])
			h.items, h.head = h.items[:n], 0
		}
		var next time.Duration = -1
		if h.head < len(h.items) {
			next = h.items[h.head].due.Sub(now)
		}
		h.mu.Unlock()
		for i := range due {
			// Never waits: a retry goes back to the queue it was
			// received from, over its capacity if need be (see Memory).
			one[0] = due[i].l
			err := due[i].target.PutTail(one[:])
			one[0] = Letter[T]{}
			if err != nil {
				return // closed
			}
		}
		clear(due)
		due = due[:0]
		var fire <-chan time.Time
		if next >= 0 {
			timer.Reset(next)
			fire = timer.C
		}
		select {
		case <-fire:
		case <-h.wake:
			timer.Stop()
		case <-h.ctx.Done():
			timer.Stop()
			return
		}
	}
}

// backlog holds the letters waiting for room in one queue (a group's queue
// or a DLQ), so that a requeue or a dead-lettering never waits: while
// nothing waits and the queue has room, a letter goes straight in;
// otherwise it joins the backlog, whose one goroutine (started when a
// letter first waits, ending when none is left, waited for by Close) moves
// the letters into the queue in order as room appears. It holds at most limit
// letters (the backend's Capacity).
type backlog[T any] struct {
	m      *Memory[T]
	target *queue.Queue[Letter[T]]
	name   string // for errors: `group "g" of "topic"`, `DLQ "d"`
	limit  int

	mu      sync.Mutex
	items   []Letter[T] // waiting, oldest first from head
	head    int
	moving  int  // taken by run, not yet in target (0 or 1)
	running bool // run's goroutine is started
}

// len returns how many letters wait.
func (b *backlog[T]) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.items) - b.head + b.moving
}

// put queues l in the target, or behind the letters waiting, without
// waiting.
func (b *backlog[T]) put(l Letter[T]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	waiting := len(b.items) - b.head + b.moving
	if waiting == 0 {
		ok, err := b.target.TryPublish(l)
		if err != nil || ok {
			return mapQueueErr(err)
		}
	} else if b.target.Closed() {
		return ErrClosed
	}
	if waiting >= b.limit {
		return fmt.Errorf("topology: %s: %w, and %d letters wait for room behind it", b.name, ErrFull, b.limit)
	}
	if !b.running {
		if !b.m.spawn(b.run) {
			return ErrClosed
		}
		b.running = true
	}
	b.items = append(b.items, l)
	return nil
}

// run moves the waiting letters into the target, one at a time and in
// order, each as soon as it has room, until none is left or the backend
// closes (the letters still waiting are then dropped).
func (b *backlog[T]) run() {
	for {
		b.mu.Lock()
		if b.head == len(b.items) {
			clear(b.items)
			b.items, b.head, b.running = b.items[:0], 0, false
			b.mu.Unlock()
			return
		}
		l := b.items[b.head]
		b.items[b.head] = Letter[T]{}
		b.head++
		if b.head > 64 && b.head > len(b.items)/2 {
			n := copy(b.items, b.items[b.head:])
			clear(b.items[n:])
			b.items, b.head = b.items[:n], 0
		}
		b.moving = 1
		b.mu.Unlock()
		err := b.target.Publish(b.m.ctx, l)
		b.mu.Lock()
		b.moving = 0
		if err != nil { // closed
			clear(b.items)
			b.items, b.head, b.running = nil, 0, false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}
