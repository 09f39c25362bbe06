// Package batching runs the batchers of a pipeline: each named batcher
// groups the messages routed to it by batch key, emits a batch on size,
// weight, timeout or flush, and its batch processors call the user's batch handler
// and acknowledge every message. Only package pipeline uses it.
package batching

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/group"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/internal/release"
	"github.com/boulevard-go/boulevard/internal/safehooks"
	"github.com/boulevard-go/boulevard/internal/stage/failurelog"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Config is what the pipeline gives a batcher besides the user's options.
type Config struct {
	// Name is the pipeline's name; the stage is named
	// "<Name>.batcher.<batcher name>".
	Name string
	// Logger receives the stage's logs. Nil means slog.Default().
	Logger *slog.Logger
	// Hooks are the pipeline's telemetry hooks; nil is off. A hook that
	// panics is recovered and logged (see internal/safehooks).
	Hooks *telemetry.Hooks
	// FailureLogInterval is how long after a line of one kind of failure
	// (PartitionBy or Weight panicked, a batch handler failed or
	// panicked) the batcher only counts the like ones, which the next
	// line of that kind counts (see logburst). Zero means
	// logburst.Interval; a negative value logs every failure.
	FailureLogInterval time.Duration
	// Release is the pipeline's release signal: while a source releases a
	// feed and waits for its messages in flight (release.Signal.Begin),
	// every partition emits its open batches at once, with trigger flush,
	// and emits each batch as soon as the chunk that filled it is taken
	// in. Nil means none.
	Release *release.Signal
}

// minQueueCapacity is the smallest input queue a batcher partition gets.
const minQueueCapacity = 64

// queueSlotBudget bounds the input queues of a batcher's partitions, all of
// them together, beyond their minimum: a huge BatchSize, or many
// partitions, must not reserve memory for messages that never come. A
// batch grows as its messages arrive, whatever the queue's capacity.
const queueSlotBudget = 1 << 20

// batchSlotBudget bounds what small batches add to the batch queues of a
// partitioned batcher, all of them together, beyond their minimum of 2:
// ⌈64/BatchSize⌉ batches for each of thousands of partitions would
// reserve tens of MiB for batches that never come.
const batchSlotBudget = 1 << 16

// Batcher is one named batcher with its batch processors.
type Batcher[T any] struct {
	opts    batcher.Options[T]
	log     *slog.Logger
	name    string
	input   *queue.Partitioned[*message.Message[T]]
	batches []*queue.Queue[message.Batch[T]]
	hooks   *telemetry.Hooks
	fails   *failurelog.Lines
	release *release.Signal

	// loops[i] and procs[i]: partition i, batch processor i has not
	// returned.
	loops, procs []atomic.Bool
	st           batcherStats
}

// New prepares the batcher. opts must already carry its defaults and be
// validated; New starts nothing.
//
// Each batcher partition has an input queue of capacity
// max(min(2·BatchSize, 2²⁰/partitions), 64); batches wait for a batch
// processor in a queue of capacity max(2·Concurrency, ⌈64/BatchSize⌉)
// (max(2, min(⌈64/BatchSize⌉, 2¹⁶/partitions)) per partition when
// partitioned): small batches queue as many messages as one processor
// chunk's worth, so that a batch processor wakes once for several of them.
// opts.QueueCapacity and opts.BatchQueueCapacity, when set, are the
// capacities instead.
func New[T any](opts batcher.Options[T], cfg Config) *Batcher[T] {
	log := cmp.Or(cfg.Logger, slog.Default())
	name := cfg.Name + ".batcher." + opts.Name
	s := &Batcher[T]{
		opts:    opts,
		log:     log.With(slog.String("stage", name)),
		name:    name,
		fails:   failurelog.New(cfg.FailureLogInterval),
		release: cfg.Release,
	}
	s.hooks = safehooks.Wrap(cfg.Hooks, s.log)
	partitions := 1
	if opts.PartitionBy != nil {
		partitions = opts.Concurrency
	}
	inCap := cmp.Or(opts.QueueCapacity, max(min(2*opts.BatchSize, queueSlotBudget/partitions), minQueueCapacity))
	small := (minQueueCapacity + opts.BatchSize - 1) / opts.BatchSize
	if opts.PartitionBy == nil {
		s.input = queue.NewPartitioned[*message.Message[T]](1, inCap, nil)
		s.batches = []*queue.Queue[message.Batch[T]]{queue.New[message.Batch[T]](cmp.Or(opts.BatchQueueCapacity, max(2*opts.Concurrency, small)))}
	} else {
		key := message.GuardKey(opts.PartitionBy, func(m *message.Message[T], pe *message.PanicError) {
			s.fails.PartitionBy.Line(context.Background(), s.log, slog.Any("message", failurelog.Failed(m)),
				slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
		})
		s.input = queue.NewPartitioned(opts.Concurrency, inCap, key)
		for range opts.Concurrency {
			s.batches = append(s.batches, queue.New[message.Batch[T]](cmp.Or(opts.BatchQueueCapacity, max(2, min(small, batchSlotBudget/partitions)))))
		}
	}
	s.loops = make([]atomic.Bool, s.input.Len())
	s.procs = make([]atomic.Bool, opts.Concurrency)
	s.st = newBatcherStats(s.input.Len(), opts.Concurrency, sampleEvery(opts.BatchSize))
	for _, flags := range [][]atomic.Bool{s.loops, s.procs} {
		for i := range flags {
			flags[i].Store(true)
		}
	}
	return s
}

// Name is the batcher's name.
func (s *Batcher[T]) Name() string { return s.opts.Name }

// Publish hands messages to the batcher (to their partitions when
// partitioned). It blocks while the batcher's input is full and returns how
// many messages it took, with ctx.Err() or queue.ErrClosed when it
// stopped early: then the n it took are msgs[:n], the others follow (it
// reorders msgs if it must, see queue.Partitioned.PublishBatchTakenFirst).
// When PartitionBy ends the goroutine (runtime.Goexit), the messages it
// took are set to nil in msgs first, and the others left as they were,
// for the caller to report (see processing.Route).
func (s *Batcher[T]) Publish(ctx context.Context, msgs []*message.Message[T]) (int, error) {
	return s.input.PublishBatchTakenFirst(ctx, msgs)
}

// CloseInput closes the batcher's input: each partition then emits its open
// batches with trigger flush, and the batch processors return once every
// batch is handled.
func (s *Batcher[T]) CloseInput() { s.input.Close() }

// StageName is the stage's name, "<pipeline>.batcher.<name>".
func (s *Batcher[T]) StageName() string { return s.name }

// QueueCapacity is the capacity of each batcher partition's input queue,
// in messages.
func (s *Batcher[T]) QueueCapacity() int { return s.input.Partition(0).Cap() }

// BatchQueueCapacity is the capacity of each queue of batches waiting for
// a batch processor (the one shared queue when not partitioned), in
// batches.
func (s *Batcher[T]) BatchQueueCapacity() int { return s.batches[0].Cap() }

// Running returns the indexes of the batcher partitions and of the batch
// processors that have not returned yet (all of them before Run).
func (s *Batcher[T]) Running() (partitions, batchProcessors []int) {
	return runningIn(s.loops), runningIn(s.procs)
}

func runningIn(flags []atomic.Bool) []int {
	var idx []int
	for i := range flags {
		if flags[i].Load() {
			idx = append(idx, i)
		}
	}
	return idx
}

// Run runs the batcher partitions and the batch processors and returns when
// all of them have returned: the partitions once the input is closed and
// drained (CloseInput) and their open batches emitted, the batch processors
// once every batch is handled. ctx is the pipeline's hard-stop context: when
// it is cancelled, open batches and queued messages stay unacknowledged.
// Once all have returned, it logs the failures held back since the last
// line of their kind. Call it once.
func (s *Batcher[T]) Run(ctx context.Context) {
	var loops, procs group.Group
	for i := range s.input.Len() {
		out := s.batches[min(i, len(s.batches)-1)]
		b := &partition[T]{s: s, index: i, in: s.input.Partition(i), out: out, st: s.st.parts[i], wake: s.release.Listen()}
		loops.Go(func() { s.partitionWork(ctx, &loops, b) })
	}
	for i := range s.opts.Concurrency {
		bp := &batchProcessor[T]{s: s, log: s.log.With(slog.Int("batch_processor", i)), st: s.st.procs[i], index: i, epoch: time.Now()}
		in := s.batches[min(i, len(s.batches)-1)]
		procs.Go(func() { s.work(ctx, &procs, bp, in) })
	}
	loops.Wait()
	for _, q := range s.batches {
		q.Close()
	}
	procs.Wait()
	s.leftQueued()
	s.st.settle()
	s.fails.Flush(ctx, s.log)
}

// work runs batch processor bp until it returns. When user code it calls
// ends its goroutine with runtime.Goexit (t.FailNow does), the batch it
// held has been settled by then (exited), and work starts a new goroutine
// in g, which Run waits for like the others, to go on as bp with the
// batches it had taken and the same queue: the batcher keeps its
// concurrency. The check is one flag per goroutine, nothing per batch or
// message.
func (s *Batcher[T]) work(ctx context.Context, g *group.Group, bp *batchProcessor[T], in *queue.Queue[message.Batch[T]]) {
	returned := false
	defer func() {
		if !returned {
			if bp.step == stepBatchStop {
				bp.batchStopExited(ctx)
			}
			// Let go of the batches handled: those before bp.rest.
			handled := len(bp.buf)
			if len(bp.rest) > 0 {
				handled = cap(bp.buf) - cap(bp.rest)
			}
			clear(bp.buf[:handled])
			g.Go(func() { s.work(ctx, g, bp, in) })
			return
		}
		s.procs[bp.index].Store(false)
	}()
	bp.loop(ctx, in)
	returned = true
}

// partitionWork runs partition b until it returns. When user code it
// calls (Weight, the BatchEmit hook, an acknowledger) ends its goroutine
// with runtime.Goexit, partitionWork starts a new goroutine in g, which
// Run waits for like the others, to go on as b where it stopped (see
// partition.resume): the partition keeps taking messages in, so that
// nothing waits for it in vain. The check is one flag per goroutine,
// nothing per message.
func (s *Batcher[T]) partitionWork(ctx context.Context, g *group.Group, b *partition[T]) {
	returned := false
	defer func() {
		if !returned {
			// Taken here, where the exit's frames are still on the
			// stack, for resume to log.
			b.exitStack = debug.Stack()
			g.Go(func() { s.partitionWork(ctx, g, b) })
			return
		}
		s.loops[b.index].Store(false)
	}()
	b.loop(ctx)
	returned = true
}

// leftQueued takes, once every partition and batch processor has returned,
// the batches left in the batch queues (only a hard stop leaves any) and
// logs them in one warning: no batch processor handled them, and their
// messages stay unacknowledged (but those it drops, see left). Counted
// here, and not by the batch processors, a queue shared by several of them
// is counted once.
func (s *Batcher[T]) leftQueued() {
	var buf [16]message.Batch[T]
	batches := 0
	var l left[T]
	for _, q := range s.batches {
		for {
			n, _ := q.TryReceive(buf[:])
			if n == 0 {
				break
			}
			batches += n
			for i := range buf[:n] {
				l.add(buf[i].Messages)
			}
			clear(buf[:n])
		}
	}
	if batches > 0 {
		s.st.drop(l.dropped)
		s.log.Warn("batcher stopped by the shutdown timeout; batches queued for a batch processor stay unacknowledged",
			l.attrs(slog.Int("batches", batches))...)
	}
}

// left counts the messages a hard stop leaves behind in the batcher: owed,
// those that stay unacknowledged, for the source to deliver again; and
// dropped, those whose outcome is not the batcher's to report (their
// processor acknowledged them already, message.AckImmediately, or they
// are deferred, message.Defer): no batch handler sees them, and no
// acknowledgement is owed for them. Only the hard stop counts them, so
// the messages' flags are read on that path alone.
type left[T any] struct{ owed, dropped int }

// add counts msgs.
func (l *left[T]) add(msgs []*message.Message[T]) {
	for _, m := range msgs {
		if m.Acknowledged() || m.Deferred() {
			l.dropped++
		} else {
			l.owed++
		}
	}
}

// attrs are a warning's attributes: attrs, "messages" (those owed) and,
// when there are any, "dropped".
func (l left[T]) attrs(attrs ...any) []any {
	attrs = append(attrs, slog.Int("messages", l.owed))
	if l.dropped > 0 {
		attrs = append(attrs, slog.Int("dropped", l.dropped))
	}
	return attrs
}

// open is a batch being filled.
type open[T any] struct {
	key      string
	msgs     []*message.Message[T]
	weight   int // total weight of msgs, with a Weight function
	started  time.Time
	deadline time.Time
	gen      uint64
}

type slot[T any] struct {
	b   *open[T]
	gen uint64
}

// partition groups one partition's messages into batches.
type partition[T any] struct {
	s     *Batcher[T]
	index int
	in    *queue.Queue[*message.Message[T]]
	out   *queue.Queue[message.Batch[T]]
	st    *partShard
	// wake receives a value when a source begins to release a feed (see
	// Config.Release); nil without a release signal.
	wake <-chan struct{}

	acks  acker.Group
	weigh func(*message.Message[T]) int // opts.Weight guarded against panics; nil without
	byKey map[string]*open[T]
	last  *open[T]  // the batch the previous message joined; may be emitted since
	order []slot[T] // open batches by deadline (= arrival of first message)
	head  int
	free  []*open[T]
	// peak is the most batches open at once since the last trim, mapPeak
	// the most byKey has held since it was made (see trim).
	peak, mapPeak int
	// emitted are the batches emitted while taking in one chunk, handed to
	// the batch processors together once the chunk is taken in (or once
	// there are maxEmitted of them): one queue operation and one wake-up
	// for several small batches.
	emitted []message.Batch[T]

	// What a goroutine that takes over from one that user code ended
	// (runtime.Goexit) goes on from (see resume). buf receives chunks;
	// chunk is the one being taken in, nil once it is; at is the index
	// of the message of chunk being taken in.
	buf   []*message.Message[T]
	chunk []*message.Message[T]
	at    int
	// exitedIn is the message whose Weight ended the goroutine;
	// flushing is set while b.acks is flushed; started once loop has
	// set the partition up.
	exitedIn *message.Message[T]
	flushing bool
	started  bool
	// exitStack is the stack of the goroutine that user code ended,
	// for resume to log.
	exitStack []byte
}

// maxEmitted is the most emitted batches a partition holds before it hands
// them to the batch processors.
const maxEmitted = 64

func (b *partition[T]) loop(ctx context.Context) {
	if !b.started {
		b.started = true
		b.byKey = make(map[string]*open[T])
		if b.s.opts.Weight != nil {
			b.weigh = guardWeight(b.s.opts.Weight, b.s.log, &b.s.fails.Weight, func(m *message.Message[T]) { b.exitedIn = m })
		}
		// The queue never holds more than its capacity: a larger buffer
		// would only reserve memory (MaxDemand × partitions is not
		// bounded).
		b.buf = make([]*message.Message[T], min(b.s.opts.MaxDemand, b.in.Cap()))
	} else {
		if !b.resume(ctx) {
			return
		}
		// The exit may have come while a release emitted the open
		// batches, its wake-up taken: the rest are emitted now.
		if ctx.Err() == nil && b.s.release.Active() && !b.flushOpen(ctx) {
			return
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var armed time.Time
	for {
		var alarm <-chan time.Time
		if first := b.first(); first != nil {
			if !first.deadline.Equal(armed) {
				armed = first.deadline
				timer.Reset(time.Until(armed))
			}
			alarm = timer.C
		}
		n, woken, err := b.in.ReceiveOrWake(ctx, b.buf, alarm, b.wake)
		if err != nil {
			if ctx.Err() != nil {
				b.leftBehind(ctx, nil)
				return
			}
			// Input closed and drained: the pipeline is draining.
			b.flushOpen(ctx)
			return
		}
		if n == 0 {
			// The alarm fired, or a release began; the timer needs
			// re-arming either way.
			armed = time.Time{}
			if woken {
				// A wake-up left by a release that has ended since
				// (several began and ended before the partition ran, or
				// a chunk taken in meanwhile flushed already) cuts
				// nothing short.
				if b.s.release.Active() && !b.flushOpen(ctx) {
					return
				}
				continue
			}
		}
		b.st.received(n)
		b.chunk, b.at = b.buf[:n], 0
		if !b.takeIn(ctx, time.Now()) {
			return
		}
		// One atomic load per chunk: while a source releases a feed, no
		// batch waits for its timeout.
		if b.s.release.Active() && !b.flushOpen(ctx) {
			return
		}
	}
}

// flushOpen emits every open batch, in deadline order, with trigger flush,
// and hands them over: the pipeline drains, or a source releases a feed
// and waits for its messages in flight (Config.Release). It reports false
// when the hard stop came (it has called leftBehind then).
func (b *partition[T]) flushOpen(ctx context.Context) bool {
	return b.emitOpen(ctx, time.Time{}, message.TriggerFlush)
}

// takeIn sorts the messages of b.chunk from b.at on into batches, reports
// those that failed on their way in, emits the batches due by now and
// hands what it emitted over. It reports false when the hard stop came
// (it has called leftBehind then).
func (b *partition[T]) takeIn(ctx context.Context, now time.Time) bool {
	for ; b.at < len(b.chunk); b.at++ {
		m := b.chunk[b.at]
		w := 0
		if !m.Failed() && b.weigh != nil {
			w = b.weigh(m)
		}
		if m.Failed() {
			// Only a panicking (or exiting) PartitionBy or Weight fails
			// a message on its way here: it joins no batch and is
			// acknowledged at once.
			b.st.rejected(m.Disposition())
			m.AddTo(&b.acks)
			continue
		}
		if !b.add(ctx, m, w, now) {
			rest := b.chunk[b.at+1:]
			b.chunk = nil
			b.leftBehind(ctx, rest)
			clear(b.buf)
			return false
		}
	}
	b.flush(ctx)
	clear(b.chunk)
	b.chunk = nil
	return b.emitDue(ctx, now)
}

// flush reports the outcomes in b.acks.
func (b *partition[T]) flush(ctx context.Context) {
	if b.acks.Len() > 0 {
		b.flushing = true
		b.acks.Flush(ctx, b.s.log)
		b.flushing = false
	}
}

// emitDue emits the open batches whose deadline is not after now and hands
// what was emitted over. It reports false when the hard stop came (it has
// called leftBehind then).
func (b *partition[T]) emitDue(ctx context.Context, now time.Time) bool {
	return b.emitOpen(ctx, now, message.TriggerTimeout)
}

// emitOpen emits, in deadline order and with trigger, the open batches
// whose deadline is not after due (every one for a zero due), and hands
// what was emitted over. It reports false when the hard stop came (it has
// called leftBehind then).
func (b *partition[T]) emitOpen(ctx context.Context, due time.Time, trigger message.Trigger) bool {
	for first := b.first(); first != nil && (due.IsZero() || !first.deadline.After(due)); first = b.first() {
		if !b.emit(ctx, first, trigger) {
			b.leftBehind(ctx, nil)
			return false
		}
	}
	if !b.handOver(ctx) {
		b.leftBehind(ctx, nil)
		return false
	}
	return true
}

// resume is where a goroutine that takes over from one that user code
// ended (runtime.Goexit) starts. It logs the exit in one error line, with
// its stack, before it calls user code again, and goes on where the
// partition stopped: the outcomes being reported when an acknowledger
// exited are left, unacknowledged (the other ones in b.acks, not reported
// yet, are kept); a message whose Weight exited has failed with
// message.ErrHandlerExited and is acknowledged at once, as one whose
// Weight panicked; after an exit in the BatchEmit hook, the batch it
// observed has been emitted all the same. Then the rest of the chunk is
// taken in as usual. It reports false when the hard stop came.
func (b *partition[T]) resume(ctx context.Context) bool {
	attrs := []any{slog.Int("partition", b.index)}
	emitting := false
	switch {
	case b.flushing:
		b.flushing = false
		b.acks.Reset()
		attrs = append(attrs, slog.String("while", "reporting outcomes"))
	case b.exitedIn != nil:
		attrs = append(attrs, slog.String("while", "weighing a message"), slog.Any("message", b.exitedIn))
		b.exitedIn = nil
	default:
		attrs = append(attrs, slog.String("while", "emitting a batch"))
		emitting = b.chunk != nil
	}
	b.s.log.Error(PartitionExitedLog, append(attrs, slog.String("stack", string(b.exitStack)))...)
	b.exitStack = nil
	if b.chunk == nil {
		// Between chunks: the batches emitted and not handed over yet go
		// first. The loop emits the due ones once its timer fires.
		if ctx.Err() == nil && !b.handOver(ctx) {
			b.leftBehind(ctx, nil)
			return false
		}
		return true
	}
	if emitting {
		// The exit came in the BatchEmit hook once the message at b.at
		// was in its batch: that batch may be due too. b.at moves past
		// the message only once that is settled, so that an exit in the
		// hook here brings the next goroutine back to the same message,
		// whose batch has been cut by then.
		m := b.chunk[b.at]
		if ob := b.last; ob != nil && len(ob.msgs) > 0 && ob.msgs[len(ob.msgs)-1] == m {
			if !b.due(ctx, ob, m) {
				rest := b.chunk[b.at+1:]
				b.chunk = nil
				b.leftBehind(ctx, rest)
				clear(b.buf)
				return false
			}
		}
		b.at++
	}
	return b.takeIn(ctx, time.Now())
}

// first returns the open batch with the earliest deadline.
func (b *partition[T]) first() *open[T] {
	for b.head < len(b.order) {
		sl := b.order[b.head]
		if sl.b.gen == sl.gen && sl.b.msgs != nil {
			return sl.b
		}
		b.order[b.head] = slot[T]{}
		b.head++
	}
	b.order = b.order[:0]
	b.head = 0
	b.trim()
	return nil
}

// trimAbove is how many spare open batches a partition keeps beyond twice
// the most it had open at once lately (see trim).
const trimAbove = 1024

// trim lets go of the bookkeeping a burst of many keys left behind: spare
// open batches (free), slots of order and the byKey map beyond what
// 2·peak + trimAbove batches need, peak being the most batches open at
// once since the previous trim. Without it a partition would hold, for
// the rest of its life, memory in proportion to the most keys it ever had
// open at once (about 170 bytes a key). It is called where order is
// emptied or compacted (first, compact), costs a few comparisons when
// there is nothing to let go of, and a steady load keeps what it uses:
// its peak between two calls is what it has open at most.
func (b *partition[T]) trim() {
	keep := 2*b.peak + trimAbove
	b.peak = len(b.byKey)
	if len(b.free) > keep {
		clear(b.free[keep:])
		b.free = append(make([]*open[T], 0, keep), b.free[:keep]...)
	}
	if cap(b.order) > 2*keep && b.head == 0 {
		if len(b.order) == 0 {
			b.order = nil
		} else {
			b.order = append(make([]slot[T], 0, 2*len(b.order)), b.order...)
		}
	}
	if b.mapPeak > keep {
		m := make(map[string]*open[T], len(b.byKey))
		maps.Copy(m, b.byKey)
		b.byKey = m
		b.mapPeak = len(m)
	}
}

// add puts m, of weight w, into the open batch of its key and emits what
// is due.
func (b *partition[T]) add(ctx context.Context, m *message.Message[T], w int, now time.Time) bool {
	key := m.BatchKey()
	if b.s.opts.BatchSize == 1 && b.weigh == nil {
		// Every message is a batch of its own: no open batch to keep.
		trigger := message.TriggerSize
		if m.BatchMode() == message.Flush {
			trigger = message.TriggerFlush
		}
		return b.publish(ctx, message.Batch[T]{
			Messages: []*message.Message[T]{m},
			Info:     b.info(key, 1, w, trigger, now),
		})
	}
	// Consecutive messages usually share a key: try the last batch first.
	ob := b.last
	if ob == nil || ob.msgs == nil || ob.key != key {
		ob = b.byKey[key]
		if ob == nil {
			ob = b.newOpen(key, now)
		}
		b.last = ob
	}
	if b.weigh != nil && len(ob.msgs) > 0 && ob.weight > b.s.opts.MaxWeight-w {
		// m would push the batch past MaxWeight: it starts the next one,
		// which it joins before the full one is emitted, so that it is
		// in a batch whatever the BatchEmit hook does.
		full := b.cut(ob, message.TriggerWeight)
		ob = b.newOpen(key, now)
		b.last = ob
		ob.msgs = append(ob.msgs, m)
		ob.weight += w
		if !b.publish(ctx, full) {
			// The hard stop came: m waits in its batch for leftBehind to
			// count it.
			return false
		}
		return b.due(ctx, ob, m)
	}
	ob.msgs = append(ob.msgs, m)
	ob.weight += w
	return b.due(ctx, ob, m)
}

// due emits ob, which m joined last, when it is due: m is in flush mode,
// or ob holds BatchSize messages, or MaxWeight. It reports false when the
// hard stop came first.
func (b *partition[T]) due(ctx context.Context, ob *open[T], m *message.Message[T]) bool {
	switch {
	case m.BatchMode() == message.Flush:
		return b.emit(ctx, ob, message.TriggerFlush)
	case len(ob.msgs) >= b.s.opts.BatchSize:
		return b.emit(ctx, ob, message.TriggerSize)
	case b.weigh != nil && ob.weight >= b.s.opts.MaxWeight:
		return b.emit(ctx, ob, message.TriggerWeight)
	}
	return true
}

// guardWeight wraps the user's Weight function: a negative weight counts as
// 0, and a panic fails the message with a *message.PanicError (logged) and
// weighs it 0; the line goes through panicked, which logs it on log or
// counts it. When weight ends the goroutine (runtime.Goexit), the message
// fails with message.ErrHandlerExited and exited is told, before the
// goroutine ends.
func guardWeight[T any](weight func(*message.Message[T]) int, log *slog.Logger, panicked *logburst.Kind, exited func(*message.Message[T])) func(*message.Message[T]) int {
	return func(m *message.Message[T]) (w int) {
		var err error
		func() {
			returned := false
			defer func() {
				if !returned && err == nil {
					m.Fail(message.ErrHandlerExited)
					exited(m)
				}
			}()
			defer message.Recover(&err)
			w = weight(m)
			returned = true
		}()
		if pe, ok := err.(*message.PanicError); ok {
			panicked.Line(context.Background(), log, slog.Any("message", m),
				slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
			m.Fail(pe)
			return 0
		}
		return max(w, 0)
	}
}

func (b *partition[T]) newOpen(key string, now time.Time) *open[T] {
	var ob *open[T]
	if n := len(b.free); n > 0 {
		ob = b.free[n-1]
		b.free = b.free[:n-1]
	} else {
		ob = &open[T]{}
	}
	ob.key = key
	// Many keys with few messages each must not reserve BatchSize slots
	// apiece: start small and let append grow busy batches.
	ob.msgs = make([]*message.Message[T], 0, min(b.s.opts.BatchSize, 256))
	ob.started = now
	ob.deadline = now.Add(b.s.opts.BatchTimeout)
	b.byKey[key] = ob
	if n := len(b.byKey); n > b.peak {
		b.peak = n
		b.mapPeak = max(b.mapPeak, n)
	}
	if len(b.order) >= 2*len(b.byKey)+16 {
		b.compact()
	}
	b.order = append(b.order, slot[T]{b: ob, gen: ob.gen})
	return ob
}

// compact drops the slots of emitted batches from order, keeping the open
// ones in deadline order. Without it order would grow by one slot per batch
// for as long as some batch is always open (a steady stream, or a slow key
// held open while a busy key emits batch after batch). newOpen calls it when
// at least half the slots are dead, so it costs O(1) per batch amortised.
func (b *partition[T]) compact() {
	live := b.order[:0]
	for _, sl := range b.order[b.head:] {
		if sl.b.gen == sl.gen && sl.b.msgs != nil {
			live = append(live, sl)
		}
	}
	clear(b.order[len(live):])
	b.order = live
	b.head = 0
	b.trim()
}

// emit hands ob to the batch processors. It reports false when the hard
// stop came first.
func (b *partition[T]) emit(ctx context.Context, ob *open[T], trigger message.Trigger) bool {
	return b.publish(ctx, b.cut(ob, trigger))
}

// cut closes ob and returns it as a batch, emitted with trigger, for
// publish.
func (b *partition[T]) cut(ob *open[T], trigger message.Trigger) message.Batch[T] {
	batch := message.Batch[T]{
		Messages: ob.msgs,
		Info:     b.info(ob.key, len(ob.msgs), ob.weight, trigger, ob.started),
	}
	delete(b.byKey, ob.key)
	ob.msgs = nil
	ob.key = ""
	ob.weight = 0
	ob.gen++
	b.free = append(b.free, ob)
	return batch
}

// info describes a batch this partition emits.
func (b *partition[T]) info(key string, size, weight int, trigger message.Trigger, started time.Time) message.BatchInfo {
	return message.BatchInfo{
		Batcher:   b.s.opts.Name,
		BatchKey:  key,
		Partition: b.index,
		Size:      size,
		Weight:    weight,
		Trigger:   trigger,
		Started:   started,
	}
}

// publish counts batch as emitted and queues it for the batch processors,
// handing what is queued over once maxEmitted batches wait. It reports
// false when the hard stop came first.
func (b *partition[T]) publish(ctx context.Context, batch message.Batch[T]) bool {
	b.st.emitted(batch.Info.Trigger, batch.Info.Size)
	b.emitted = append(b.emitted, batch)
	if b.s.hooks != nil {
		// After the batch is in b.emitted: a hook that ends the
		// goroutine leaves it emitted.
		b.s.emitHook(ctx, batch.Info)
	}
	if len(b.emitted) >= maxEmitted {
		return b.handOver(ctx)
	}
	return true
}

// handOver hands the emitted batches to the batch processors, in the order
// they were emitted, blocking while their queue is full. It reports false
// when the hard stop came first: the batches not handed over stay in
// b.emitted, for leftBehind to count.
func (b *partition[T]) handOver(ctx context.Context) bool {
	if len(b.emitted) == 0 {
		return true
	}
	n, err := b.out.PublishBatch(ctx, b.emitted)
	if err != nil {
		clear(b.emitted[:n])
		b.emitted = b.emitted[n:]
		return false
	}
	clear(b.emitted)
	b.emitted = b.emitted[:0]
	return true
}

// leftBehind is the partition's last step once the hard stop has come. It
// acknowledges the messages of the chunk that failed on their way in, then
// closes the partition's queue (a late Publish gets queue.ErrClosed rather
// than leave messages nobody takes), takes what is left in it, and logs in
// one warning every message that stays unacknowledged: those queued, rest
// (the part of the chunk not yet taken in), those in open batches and
// those of the emitted batches not handed over, and those of them it drops
// (see left). It lets go of all of them.
func (b *partition[T]) leftBehind(ctx context.Context, rest []*message.Message[T]) {
	b.flush(ctx)
	b.in.Close()
	queued := 0
	var l left[T]
	var buf [64]*message.Message[T]
	for {
		n, _ := b.in.TryReceive(buf[:])
		if n == 0 {
			break
		}
		queued += n
		l.add(buf[:n])
		clear(buf[:n])
	}
	// Taken in, to stay unacknowledged: counted in, so that the stats'
	// unhandled count (what was taken in without an outcome) has them.
	b.st.received(queued)
	l.add(rest)
	clear(rest)
	for _, ob := range b.byKey {
		l.add(ob.msgs)
	}
	clear(b.byKey)
	for _, batch := range b.emitted {
		l.add(batch.Messages)
	}
	clear(b.emitted)
	b.emitted = nil
	if l.owed+l.dropped > 0 {
		b.s.st.drop(l.dropped)
		b.s.log.Warn("batcher stopped by the shutdown timeout; messages stay unacknowledged",
			l.attrs(slog.Int("partition", b.index))...)
	}
}

// batchProcessor calls the batch handler and acknowledges.
type batchProcessor[T any] struct {
	s      *Batcher[T]
	log    *slog.Logger
	acks   acker.Group
	failed []*message.Message[T]
	// msgs is the copy of the batch being handled (see handle), as long
	// as the longest batch so far.
	msgs  []*message.Message[T]
	st    *procShard
	index int
	// For the telemetry hooks: the clock's origin and the number of
	// failed messages of the batch being handled.
	epoch       time.Time
	batchFailed int
	batchT      time.Duration // when the batch started, for BatchStop
	// buf receives batches from the queue; rest are those taken and not
	// yet handled, which a batch processor taking over handles first.
	buf, rest []message.Batch[T]
	// step is where the batch processor is in its batch, for exited.
	step step
}

// step is where a batch processor is in its batch.
type step uint8

const (
	// stepIdle: between batches.
	stepIdle step = iota
	// stepHandler: the batch handler (or a telemetry hook before it)
	// runs.
	stepHandler
	// stepHandleFailed: HandleFailed (or its telemetry hook) runs.
	stepHandleFailed
	// stepReporting: the outcomes are being reported.
	stepReporting
	// stepBatchStop: the BatchStop hook runs, once the batch is settled
	// (exited has nothing to do by then; work logs an exit).
	stepBatchStop
)

func (bp *batchProcessor[T]) loop(ctx context.Context, in *queue.Queue[message.Batch[T]]) {
	// A batch processor alone on its queue takes small batches several at
	// a time (up to 64 messages), each still handled and acknowledged on
	// its own. Batch processors that share a queue take one at a time, so
	// that a batch never waits behind another while a sibling is idle.
	if bp.buf == nil {
		bp.buf = make([]message.Batch[T], 1)
		if bp.s.opts.Concurrency == 1 || bp.s.opts.PartitionBy != nil {
			bp.buf = make([]message.Batch[T], max(1, min(16, minQueueCapacity/bp.s.opts.BatchSize, in.Cap())))
		}
	}
	defer bp.st.stopped()
	for {
		if len(bp.rest) == 0 {
			n, err := in.Receive(ctx, bp.buf)
			if err != nil {
				// Drained, or stopped by the hard stop: the batches
				// still queued are the batcher's to count (Run).
				return
			}
			bp.rest = bp.buf[:n]
		}
		for len(bp.rest) > 0 {
			if ctx.Err() != nil {
				bp.leftBehind(bp.rest)
				bp.rest = nil
				return
			}
			b := &bp.rest[0]
			bp.rest = bp.rest[1:]
			bp.handle(ctx, b)
			*b = message.Batch[T]{}
		}
	}
}

// leftBehind logs, in one warning, the batches the batch processor took
// and the hard stop kept from the batch handler: their messages stay
// unacknowledged, for the source to deliver again (but those it drops,
// see left).
func (bp *batchProcessor[T]) leftBehind(batches []message.Batch[T]) {
	var l left[T]
	for i := range batches {
		l.add(batches[i].Messages)
	}
	clear(batches)
	bp.s.st.drop(l.dropped)
	bp.log.Warn("batch processor stopped by the shutdown timeout; batches it took stay unacknowledged",
		l.attrs(slog.Int("batches", len(batches)))...)
}

func (bp *batchProcessor[T]) handle(ctx context.Context, b *message.Batch[T]) {
	opts := &bp.s.opts
	if bp.s.hooks != nil {
		defer bp.batchStop(ctx, b)
	}
	// The handler gets the batch's slice, which it may keep and may
	// rewrite (filter in place with slices.DeleteFunc, which clears what
	// it removes): what the batch processor fails and acknowledges is its
	// own copy of the batch.
	msgs := append(bp.msgs[:0], b.Messages...)
	bp.msgs = msgs
	defer clear(msgs)
	bp.st.took(len(msgs))
	// Deferred after the others, so that it runs first: before the
	// batch's hook; and before BatchStart, which may exit too.
	bp.step = stepHandler
	defer bp.exited(ctx, b, msgs)
	if bp.s.hooks != nil {
		bp.batchT = bp.batchStart(ctx, b)
	}
	if err := bp.callTimed(ctx, b); err != nil {
		if pe, ok := err.(*message.PanicError); ok {
			bp.s.fails.BatchPanicked.Line(ctx, bp.log,
				slog.String("batch_key", b.Info.BatchKey), slog.Int("size", b.Info.Size),
				slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
			for _, m := range msgs {
				m.Fail(err)
			}
		} else {
			kind := &bp.s.fails.BatchFailed
			if acker.CausedByShutdown(ctx, err) {
				kind = &bp.s.fails.BatchInterrupted
			}
			kind.Line(ctx, bp.log,
				slog.String("batch_key", b.Info.BatchKey), slog.Int("size", b.Info.Size), slog.Any("error", err))
			for _, m := range msgs {
				if !m.Failed() {
					m.Fail(err)
				}
			}
		}
	}
	bp.settle(ctx, b, msgs, opts.HandleFailed != nil)
}

// settle has HandleFailed (when handleFailed is set) see the failed
// messages of batch b, whose messages are msgs, then reports the outcome
// of every message and counts them once reported: until the acknowledgers
// have returned, the batch is in flight.
func (bp *batchProcessor[T]) settle(ctx context.Context, b *message.Batch[T], msgs []*message.Message[T], handleFailed bool) {
	for _, m := range msgs {
		if m.Failed() {
			// Before the hook, so that it cannot make a failure the
			// shutdown caused look handled.
			m.MarkInterrupted(ctx)
			bp.failed = append(bp.failed, m)
		}
	}
	bp.batchFailed = len(bp.failed)
	if len(bp.failed) > 0 && handleFailed {
		bp.step = stepHandleFailed
		bp.handleFailedHooked(ctx, b.Info)
	}
	clear(bp.failed)
	bp.failed = bp.failed[:0]
	bp.step = stepReporting
	for _, m := range msgs {
		bp.st.count(m.Failed(), m.Disposition())
		m.AddTo(&bp.acks)
	}
	bp.acks.Flush(ctx, bp.log)
	bp.st.batchDone()
	bp.step = stepIdle
}

// exited is deferred by handle, and does something only when user code
// ended the batch processor's goroutine (runtime.Goexit) in the middle of
// batch b, whose messages are msgs, which a recover cannot catch. When the
// batch handler (or BatchStart) exited, the whole batch fails with
// message.ErrHandlerExited, as it would with a *message.PanicError, and
// HandleFailed sees it, as it sees a batch whose handler panicked; should
// HandleFailed end the goroutine too, exited settles the batch again, from
// a deferred call, without it (a panic in it is logged, as on the usual
// path). When HandleFailed (or its hook) exited, the messages keep the
// outcome they had and HandleFailed is not called again. Either way the
// outcomes are then counted and reported once.
// When an acknowledger exited, the outcomes not reported
// yet are left, unacknowledged, for the source to deliver again. It logs
// one error line, with the stack of the exit, and the batch processor goes
// on in a new goroutine (Batcher.work) with the batches it had taken.
func (bp *batchProcessor[T]) exited(ctx context.Context, b *message.Batch[T], msgs []*message.Message[T]) {
	if bp.step == stepIdle {
		return
	}
	was := bp.step
	bp.step = stepIdle
	clear(bp.failed)
	bp.failed = bp.failed[:0]
	attrs := []any{slog.String("batch_key", b.Info.BatchKey), slog.Int("size", b.Info.Size)}
	if was == stepReporting {
		// The outcomes were tallied before they were reported: they
		// are counted, those not reported yet left unacknowledged.
		bp.st.batchDone()
		bp.acks.Reset()
		bp.log.ErrorContext(ctx, ExitedLog, append(attrs, slog.String("while", "reporting outcomes"),
			slog.String("stack", string(debug.Stack())))...)
		return
	}
	bp.log.ErrorContext(ctx, ExitedLog, append(attrs, slog.String("stack", string(debug.Stack())))...)
	if was == stepHandler {
		for _, m := range msgs {
			m.Fail(message.ErrHandlerExited)
		}
		if bp.s.opts.HandleFailed != nil {
			// Should HandleFailed end the goroutine too, the deferred call
			// settles the batch (step stepHandleFailed); once settle has
			// returned, it has nothing to do (stepIdle).
			defer bp.exited(ctx, b, msgs)
			bp.settle(ctx, b, msgs, true)
			return
		}
	}
	bp.settle(ctx, b, msgs, false)
}

// batchStopExited logs the exit of the BatchStop hook, which ended the
// batch processor's goroutine once its batch was settled: no outcome is
// left to report.
func (bp *batchProcessor[T]) batchStopExited(ctx context.Context) {
	bp.step = stepIdle
	bp.log.ErrorContext(ctx, ExitedLog, slog.String("while", "BatchStop hook"), slog.Int("size", 0),
		slog.String("stack", string(debug.Stack())))
}

func (bp *batchProcessor[T]) call(ctx context.Context, b *message.Batch[T]) (err error) {
	defer message.Recover(&err)
	return bp.s.opts.Handle(ctx, b.Messages, b.Info)
}

func (bp *batchProcessor[T]) handleFailed(ctx context.Context, info message.BatchInfo) {
	defer panics.Log(ctx, bp.log, "HandleFailed panicked; acknowledging the messages as they were")
	bp.s.opts.HandleFailed(ctx, bp.failed, info)
}

// ExitedLog is the message of the error line a batch processor logs when
// user code ended its goroutine (runtime.Goexit).
const ExitedLog = "user code ended the batch processor's goroutine (runtime.Goexit); failing the batch it held, another batch processor takes over"

// PartitionExitedLog is the message of the error line a batcher partition
// logs when user code it called (Weight, the BatchEmit hook, an
// acknowledger) ended its goroutine (runtime.Goexit).
const PartitionExitedLog = "user code ended the batcher partition's goroutine (runtime.Goexit); another goroutine takes over as that partition"
