// Package processing runs the processors of a pipeline: a pool of
// goroutines that take messages in chunks from the producer stages, call the
// user's handler on each, turn errors and panics into failed messages, and
// route every message either to a batcher or, when the pipeline has none,
// straight back to its acknowledger. Only package pipeline uses it.
package processing

import (
	"cmp"
	"context"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/group"
	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/internal/safehooks"
	"github.com/boulevard-go/boulevard/internal/stage/failurelog"
	"github.com/boulevard-go/boulevard/internal/stats"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Route is where processors hand the messages bound for one batcher. Publish
// blocks while the batcher is busy and returns how many messages it took
// before an error: msgs[:n], which it may reorder msgs to make so. The
// slice is reused by the caller once Publish returns. When user code it
// calls (a batcher's PartitionBy) ends the goroutine (runtime.Goexit),
// Publish sets the messages it took to nil in msgs first: the processor
// then fails the others with message.ErrHandlerExited and reports them.
type Route[Out any] interface {
	Publish(ctx context.Context, msgs []*message.Message[Out]) (int, error)
}

// NamedRoute is one batcher a processor can route to.
type NamedRoute[Out any] struct {
	// Name is the batcher's name, matched against Message.Batcher.
	Name string
	// Route receives the messages routed to that batcher.
	Route Route[Out]
}

// Config is what the pipeline gives its processors besides the user's
// options.
type Config[Out any] struct {
	// Name is the pipeline's name; processors are named
	// "<Name>.processor.<i>".
	Name string
	// Logger receives the stage's logs. Nil means slog.Default().
	Logger *slog.Logger
	// Routes are the pipeline's batchers. Without any, processors
	// acknowledge every message themselves.
	Routes []NamedRoute[Out]
	// Hooks are the pipeline's telemetry hooks; nil is off. A hook that
	// panics is recovered and logged (see internal/safehooks).
	Hooks *telemetry.Hooks
	// FailureLogInterval is how long after a line of one kind of failure
	// (a message failed, a handler panicked, Prepare failed, PartitionBy
	// panicked) the processors only count the like ones, which the next
	// line of that kind counts (see logburst). Zero means
	// logburst.Interval; a negative value logs every failure.
	FailureLogInterval time.Duration
	// MinQueue is the least capacity of each processor queue. The pipeline
	// sets it to the producer's permit window, so that one delivery of a
	// source usually fits in a queue and goes to it directly
	// (its TryPublish). It does not apply when the user's options set
	// QueueCapacity.
	MinQueue int
}

// minQueueCapacity is the smallest input queue a processor stage gets.
const minQueueCapacity = 64

// queueSlotBudget bounds what Config.MinQueue adds to the processors'
// queues, all of them together: a huge permit window must not make every
// queue huge.
const queueSlotBudget = 1 << 20

// slabBytes is the size of the block of Message[Out] values a processor
// allocates at once when its handler changes the payload type: 8 KiB less the
// allocator's header, so the block fills its size class without waste.
const slabBytes = 8192 - 8

// Pool is the processors of one pipeline.
type Pool[In, Out any] struct {
	opts   processor.Options[In, Out]
	log    *slog.Logger
	name   string
	input  *queue.Partitioned[*message.Message[In]]
	routes []NamedRoute[Out]
	known  []string
	hooks  *telemetry.Hooks
	plan   hookPlan

	running []atomic.Bool // running[i]: processor i has not returned
	st      poolStats
	fails   *failurelog.Lines
}

// New prepares the processors. opts must already carry its defaults and be
// validated; New starts nothing.
//
// Without PartitionBy the processors share one balanced queue of capacity
// max(2·Concurrency·MaxDemand, 64, min(cfg.MinQueue, 2²⁰)); with
// PartitionBy each processor has its own queue of capacity max(2·MaxDemand,
// 64, min(cfg.MinQueue, 2²⁰/Concurrency)), and a message goes to the queue
// its key hashes to. opts.QueueCapacity, when set, is the capacity instead.
func New[In, Out any](opts processor.Options[In, Out], cfg Config[Out]) *Pool[In, Out] {
	log := cmp.Or(cfg.Logger, slog.Default())
	name := cfg.Name + ".processor"
	s := &Pool[In, Out]{
		opts:    opts,
		log:     log,
		name:    name,
		routes:  cfg.Routes,
		hooks:   safehooks.Wrap(cfg.Hooks, log.With(slog.String("stage", name))),
		plan:    planHooks(cfg.Hooks),
		running: make([]atomic.Bool, opts.Concurrency),
		st:      newPoolStats(opts.Concurrency),
		fails:   failurelog.New(cfg.FailureLogInterval),
	}
	for i := range s.running {
		s.running[i].Store(true)
	}
	for _, r := range cfg.Routes {
		s.known = append(s.known, r.Name)
	}
	if opts.PartitionBy == nil {
		s.input = queue.NewPartitioned[*message.Message[In]](1, cmp.Or(opts.QueueCapacity, max(2*opts.Concurrency*opts.MaxDemand, minQueueCapacity, min(cfg.MinQueue, queueSlotBudget))), nil)
	} else {
		key := message.GuardKey(opts.PartitionBy, func(m *message.Message[In], pe *message.PanicError) {
			s.fails.PartitionBy.Line(context.Background(), log, slog.String("stage", s.name),
				slog.Any("message", failurelog.Failed(m)), slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
		})
		s.input = queue.NewPartitioned(opts.Concurrency, cmp.Or(opts.QueueCapacity, max(2*opts.MaxDemand, minQueueCapacity, min(cfg.MinQueue, queueSlotBudget/opts.Concurrency))), key)
	}
	return s
}

// Publish hands msgs to the processors, in order: with PartitionBy each
// message goes to the processor its key selects. It blocks while the
// processors' queues are full and returns how many messages were taken, with
// ctx.Err() or queue.ErrClosed when it stopped early.
func (s *Pool[In, Out]) Publish(ctx context.Context, msgs []*message.Message[In]) (int, error) {
	return s.input.PublishBatch(ctx, msgs)
}

// PublishProgress is Publish for a caller that gives their outcome to the
// messages PartitionBy keeps from the processors by ending the caller's
// goroutine (runtime.Goexit, which PartitionBy may call, as it runs on
// that goroutine): before each call of PartitionBy it sets *progress to
// how many messages the processors have taken, msgs[:*progress] (see
// queue.Partitioned.PublishBatchProgress), so that the caller's deferred
// code can hand the others, msgs[*progress:], to FailExited. keying, when
// not nil, holds while PartitionBy runs when it began, as the time since
// epoch, and 0 otherwise (see queue.Partitioned.PublishBatchProgress);
// without PartitionBy it stays 0 and no clock is read.
func (s *Pool[In, Out]) PublishProgress(ctx context.Context, msgs []*message.Message[In], progress *int, keying *atomic.Int64, epoch time.Time) (int, error) {
	return s.input.PublishBatchProgress(ctx, msgs, progress, keying, epoch)
}

// TryPublish hands over, without blocking, the longest prefix of msgs the
// processors' queues have room for (see queue.Partitioned.TryPublishBatch)
// and returns its length; queue.ErrClosed once the input is closed.
func (s *Pool[In, Out]) TryPublish(msgs []*message.Message[In]) (int, error) {
	return s.input.TryPublishBatch(msgs)
}

// TryPublishProgress is TryPublish keeping *progress, and dating
// PartitionBy's calls in keying, as PublishProgress does.
func (s *Pool[In, Out]) TryPublishProgress(msgs []*message.Message[In], progress *int, keying *atomic.Int64, epoch time.Time) (int, error) {
	return s.input.TryPublishBatchProgress(msgs, progress, keying, epoch)
}

// FailExited gives their outcome to messages that PartitionBy kept from
// the processors by ending the goroutine that handed them over
// (runtime.Goexit): each fails with message.ErrHandlerExited (one that
// failed before, such as one whose PartitionBy panicked, keeps its
// error), counts as taken in and failed, and is reported to its
// acknowledger at once, as
// the processors report the messages a batcher's PartitionBy left behind
// (HandleFailed does not see them). A message acknowledged already or
// deferred owes nothing more and is passed over, as is a nil one. It
// returns how many failed.
func (s *Pool[In, Out]) FailExited(ctx context.Context, msgs []*message.Message[In]) int {
	var acks acker.Group
	var failed stats.Failures
	for _, m := range msgs {
		if m == nil || m.Acknowledged() || m.Deferred() {
			continue
		}
		if !m.Failed() {
			m.Fail(message.ErrHandlerExited)
		}
		m.MarkInterrupted(ctx)
		failed.Count(uint8(m.Disposition()))
		m.AddTo(&acks)
	}
	s.st.exited(failed)
	acks.Flush(ctx, s.log)
	return int(failed.Total())
}

// QueueCapacity is the capacity of each processor queue (of the one shared
// queue without PartitionBy).
func (s *Pool[In, Out]) QueueCapacity() int { return s.input.Partition(0).Cap() }

// Run runs the processors and returns when every one of them has returned:
// each runs until its input is closed and drained (CloseInput) or ctx, the
// pipeline's hard-stop context, is cancelled. A processor whose goroutine
// user code ends (runtime.Goexit) goes on in a new goroutine of the same
// group (see work). Once they have all returned it closes the input and
// counts what a hard stop left in it (leftQueued), and logs the failures it
// held back since the last line of their kind. Call it once.
func (s *Pool[In, Out]) Run(ctx context.Context) {
	var g group.Group
	for i := range s.opts.Concurrency {
		in := s.input.Partition(min(i, s.input.Len()-1))
		p := s.newProcessor(i)
		g.Go(func() { s.work(ctx, &g, p, in) })
	}
	g.Wait()
	s.leftQueued()
	s.fails.Flush(ctx, s.log.With(slog.String("stage", s.name)))
}

// work runs processor p until it returns. When user code it calls ends
// its goroutine with runtime.Goexit (t.FailNow does), the chunk it held
// has been settled by then (exited), and work starts a new goroutine in g,
// which Run waits for like the others, to go on as p with the same input:
// the stage keeps its concurrency. The check is one flag per goroutine,
// nothing per chunk or message.
func (s *Pool[In, Out]) work(ctx context.Context, g *group.Group, p *worker[In, Out], in *queue.Queue[*message.Message[In]]) {
	returned := false
	defer func() {
		if !returned {
			if p.step == stepChunkStop {
				p.chunkStopExited(ctx)
			}
			g.Go(func() { s.work(ctx, g, p, in) })
			return
		}
		s.running[p.index].Store(false)
	}()
	p.loop(ctx, in)
	returned = true
}

// leftQueued closes the processors' input once every processor has
// returned, takes the messages left in it (only a hard stop leaves any)
// and logs them in one warning: no processor handled them, and they stay
// unacknowledged. The input is closed first, so that a late Publish fails
// rather than leave a message nobody counts; counted here, and not by the
// processors, a queue they share is counted once.
func (s *Pool[In, Out]) leftQueued() {
	s.input.Close()
	var buf [64]*message.Message[In]
	left := 0
	for i := range s.input.Len() {
		q := s.input.Partition(i)
		for {
			n, _ := q.TryReceive(buf[:])
			if n == 0 {
				break
			}
			for _, m := range buf[:n] {
				if m != nil { // a nil is dropped, never counted (dropNil)
					left++
				}
			}
			clear(buf[:n])
		}
	}
	if left > 0 {
		s.st.leftQueued(left)
		s.log.Warn("processors stopped by the shutdown timeout; messages queued for them stay unacknowledged",
			slog.String("stage", s.name), slog.Int("messages", left))
	}
}

// CloseInput closes the processors' queues: Publish fails from then on, and
// each processor returns once it has handled what is queued.
func (s *Pool[In, Out]) CloseInput() {
	s.input.Close()
}

// Name is the stage's name, "<pipeline>.processor".
func (s *Pool[In, Out]) Name() string { return s.name }

// Running returns the indexes of the processors that have not returned yet
// (all of them before Run).
func (s *Pool[In, Out]) Running() []int {
	var idx []int
	for i := range s.running {
		if s.running[i].Load() {
			idx = append(idx, i)
		}
	}
	return idx
}

// Queued reports how many messages wait in the processors' queues.
func (s *Pool[In, Out]) Queued() int {
	return s.input.Queued()
}

// worker is the state of one processor goroutine; everything in it is
// reused from chunk to chunk.
type worker[In, Out any] struct {
	s       *Pool[In, Out]
	log     *slog.Logger
	buf     []*message.Message[In]
	failed  []*message.Message[In]
	view    []*message.Message[In] // the copy of a chunk, or of failed, that Prepare and HandleFailed get
	pending [][]*message.Message[Out]
	acks    acker.Group
	same    bool
	slab    []message.Message[Out]
	st      *shard
	index   int
	clock   hookClock
	mh      messageHooks
	// step is where the processor is in its chunk, for exited: stepIdle
	// between chunks.
	step step
	// chunkT is when the chunk started, for the ChunkStop hook.
	chunkT time.Duration
	// handing is the route whose Publish runs, -1 while the chunk's
	// outcomes are reported, for exited.
	handing int
}

// step is where a processor is in its chunk.
type step uint8

const (
	// stepIdle: between chunks.
	stepIdle step = iota
	// stepHandling: Prepare, the handler or a telemetry hook may run; no
	// outcome of the chunk has been reported yet.
	stepHandling
	// stepHandleFailed: HandleFailed (or its telemetry hook) runs; no
	// outcome of the chunk has been reported yet.
	stepHandleFailed
	// stepHandingOn: the outcomes are being reported and the messages
	// handed to their batchers.
	stepHandingOn
	// stepChunkStop: the ChunkStop hook runs, once the chunk is settled
	// (exited has nothing to do by then; work logs an exit).
	stepChunkStop
)

func (s *Pool[In, Out]) newProcessor(i int) *worker[In, Out] {
	_, same := any((*message.Message[In])(nil)).(*message.Message[Out])
	return &worker[In, Out]{
		s:       s,
		log:     s.log.With(slog.String("stage", s.name), slog.Int("processor", i)),
		buf:     make([]*message.Message[In], s.opts.MaxDemand-s.opts.MinDemand),
		failed:  make([]*message.Message[In], 0, s.opts.MaxDemand-s.opts.MinDemand),
		view:    make([]*message.Message[In], 0, s.opts.MaxDemand-s.opts.MinDemand),
		pending: make([][]*message.Message[Out], len(s.routes)),
		same:    same,
		st:      s.st.shards[i],
		index:   i,
		clock:   hookClock{epoch: time.Now()},
		mh:      newMessageHooks(s.hooks, s.name, i),
	}
}

func (p *worker[In, Out]) loop(ctx context.Context, in *queue.Queue[*message.Message[In]]) {
	for {
		n, err := in.Receive(ctx, p.buf)
		if err != nil {
			p.st.busy.Stop()
			return
		}
		p.handleChunk(ctx, p.buf[:n])
		clear(p.buf[:n])
	}
}

func (p *worker[In, Out]) handleChunk(ctx context.Context, chunk []*message.Message[In]) {
	s := p.s
	if chunk = p.dropNil(chunk); len(chunk) == 0 {
		return
	}
	defer p.st.end(p.st.begin(len(chunk)))
	if s.hooks != nil {
		defer p.chunkStop(ctx, len(chunk))
	}
	// Deferred after the others, so that it runs first: before the
	// chunk's hook and its counting; and before ChunkStart, which may
	// exit too.
	p.step = stepHandling
	p.handing = -1
	defer p.exited(ctx, chunk)
	if s.hooks != nil {
		p.chunkT = p.chunkStart(ctx, len(chunk))
	}
	if s.opts.Prepare != nil {
		if err := p.prepare(ctx, chunk); err != nil {
			kind := &s.fails.Prepare
			if acker.CausedByShutdown(ctx, err) {
				kind = &s.fails.Interrupted
			}
			kind.Line(ctx, p.log, slog.Any("error", err), slog.Int("messages", len(chunk)))
			for _, m := range chunk {
				if !m.Failed() {
					m.Fail(err)
				}
			}
		}
		if s.hooks != nil {
			p.preparedMark()
		}
	}
	left := 0
	for i := 0; i < len(chunk); {
		i = p.handleFrom(ctx, chunk, i, &left)
	}
	if left > 0 {
		p.st.chunkLeft = uint64(left)
	}
	if len(p.failed) > 0 {
		for _, m := range p.failed {
			// Before the hook, so that it cannot make a failure the
			// shutdown caused look handled.
			m.MarkInterrupted(ctx)
		}
		if s.opts.HandleFailed != nil {
			p.step = stepHandleFailed
			p.handleFailedHooked(ctx, p.failed)
		}
		p.step = stepHandingOn
		for _, m := range p.failed {
			p.st.fail(uint8(m.Disposition()))
			m.AddTo(&p.acks)
		}
		clear(p.failed)
		p.failed = p.failed[:0]
	}
	if left > 0 {
		// After HandleFailed: should it end the goroutine, exited
		// reports these messages too, and logs that instead.
		p.log.WarnContext(ctx, CutLog, slog.Int("messages", left))
	}
	p.step = stepHandingOn
	p.handing = -1
	p.acks.Flush(ctx, p.log)
	for r, msgs := range p.pending {
		if len(msgs) == 0 {
			continue
		}
		p.handing = r
		if n, err := s.routes[r].Route.Publish(ctx, msgs); err != nil {
			p.notHandedOn(ctx, s.routes[r].Name, msgs[n:], err)
		}
		clear(msgs)
		p.pending[r] = msgs[:0]
	}
	p.step = stepIdle
}

// handleFrom handles chunk[from:] in turn and returns len(chunk), or, when
// a message's handler panicked, the index after that message, which it
// failed with a *message.PanicError: handleChunk then calls it again for
// the rest. One deferred recover serves the whole chunk, instead of one for
// each handler call. It recovers only a panic of the handler it called
// itself (calling ≥ 0); one anywhere else goes on up the stack, as does a
// runtime.Goexit, which exited settles. *left counts the messages a cut
// drain leaves unhandled.
func (p *worker[In, Out]) handleFrom(ctx context.Context, chunk []*message.Message[In], from int, left *int) (next int) {
	s := p.s
	calling := -1
	defer func() {
		if calling < 0 {
			return
		}
		if r := recover(); r != nil {
			p.handled(ctx, chunk[calling], *new(Out), &message.PanicError{Value: r, Stack: debug.Stack()})
			next = calling + 1
		}
	}()
	for i := from; i < len(chunk); i++ {
		m := chunk[i]
		if m.Failed() {
			p.failed = append(p.failed, m)
			continue
		}
		if ctx.Err() != nil {
			// The drain was cut short: a message the handler has not
			// seen stays unacknowledged, for the source to deliver again.
			// One Prepare deferred is its deferrer's to report: nothing
			// is owed for it, and it counts as a success, as it does
			// when its batcher does not take it (notHandedOn).
			if !m.Deferred() {
				*left++
			}
			continue
		}
		var out Out
		var err error
		switch {
		case s.plan.messages:
			out, err = p.handleHooked(ctx, m)
		case p.st.sample:
			out, err = p.handleTimed(ctx, m)
		default:
			// Called without a recover of its own: the deferred call
			// above recovers a panic of this message's handler.
			calling = i
			out, err = s.opts.Handle(ctx, m)
			calling = -1
		}
		p.handled(ctx, m, out, err)
	}
	return len(chunk)
}

// handled is what a processor does with message m once its handler
// returned out and err (or panicked, err a *message.PanicError): it fails
// m on an error, then collects m's outcome for the chunk's
// acknowledgement or hands it towards its batcher.
func (p *worker[In, Out]) handled(ctx context.Context, m *message.Message[In], out Out, err error) {
	s := p.s
	if err != nil {
		m.Fail(err)
		p.logFailure(ctx, m, err)
	}
	if m.Failed() {
		p.failed = append(p.failed, m)
		return
	}
	if len(s.routes) == 0 {
		if !m.Deferred() {
			p.convert(m, out).AddTo(&p.acks)
		}
		// A deferred message's outcome is its deferrer's, who may
		// have reported it already: the processor no longer
		// touches it.
		return
	}
	r := p.route(m.Batcher())
	if r < 0 {
		m.Fail(&processor.UnknownBatcherError{Batcher: m.Batcher(), Known: s.known})
		p.logFailure(ctx, m, m.Err())
		p.failed = append(p.failed, m)
		return
	}
	if m.AckRequested() && !m.Deferred() {
		// Acknowledged now, with the chunk; the batcher gets a copy
		// the source cannot reuse under it. A deferred message's
		// outcome is its deferrer's: it goes on as itself.
		m.AddTo(&p.acks)
		om := p.fromSlab()
		message.Detach(om, m, out)
		p.pending[r] = append(p.pending[r], om)
		return
	}
	p.pending[r] = append(p.pending[r], p.convert(m, out))
}

// exited is deferred by handleChunk, and does something only when user
// code ended the processor's goroutine (runtime.Goexit) in the middle of
// chunk, which a recover cannot catch. While the chunk was being handled
// (Prepare, the handler, HandleFailed, a telemetry hook), none of its
// outcomes was reported yet: every message of the chunk fails with
// message.ErrHandlerExited (one that failed before keeps its error, one
// deferred is its deferrer's); HandleFailed, unless it (or its hook) is
// what exited, sees them, as it sees those of a handler that panics; and
// the outcomes are reported and counted once, as those of a failed chunk
// are; none goes on to a batcher. Should HandleFailed end the goroutine
// too, exited settles the chunk again, from a deferred call, without it;
// a panic in it is logged, as on the usual path. Once the outcomes were
// being reported (an
// acknowledger exited), those not reported yet are left, unacknowledged,
// for the source to deliver again. When a batcher's PartitionBy exited
// while the messages were handed on, those not yet handed on (see Route)
// fail with message.ErrHandlerExited and are reported and counted (but
// those acknowledged already or deferred, whose outcome is not the
// processor's to report). Either way it logs one error line, with the
// stack of the exit, and the processor goes on in a new goroutine (work).
func (p *worker[In, Out]) exited(ctx context.Context, chunk []*message.Message[In]) {
	if p.step == stepIdle {
		return
	}
	was := p.step
	p.step = stepIdle
	defer clear(p.buf)
	defer func() {
		for r := range p.pending {
			clear(p.pending[r])
			p.pending[r] = p.pending[r][:0]
		}
	}()
	clear(p.failed)
	p.failed = p.failed[:0]
	if was == stepHandingOn {
		// The outcomes were tallied when they were decided (end stores
		// them), and those reported already are the acknowledgers'.
		p.acks.Reset()
		if p.handing < 0 {
			p.log.ErrorContext(ctx, ExitedLog, slog.String("while", "reporting outcomes"),
				slog.Int("messages", len(chunk)), slog.String("stack", string(debug.Stack())))
			return
		}
		failed := p.notHandedOnExited(ctx)
		p.log.ErrorContext(ctx, ExitedLog, slog.String("while", "handing messages on"),
			slog.String("batcher", p.s.routes[p.handing].Name), slog.Int("messages", failed),
			slog.String("stack", string(debug.Stack())))
		p.acks.Flush(ctx, p.log)
		return
	}
	p.acks.Reset()
	p.st.chunkLeft = 0
	for _, m := range chunk {
		if m.Deferred() {
			continue
		}
		if !m.Failed() {
			m.Fail(message.ErrHandlerExited)
		}
		// Before HandleFailed, as on the usual path.
		m.MarkInterrupted(ctx)
		p.failed = append(p.failed, m)
	}
	p.log.ErrorContext(ctx, ExitedLog, slog.Int("messages", len(p.failed)), slog.String("stack", string(debug.Stack())))
	if was == stepHandling && p.s.opts.HandleFailed != nil && len(p.failed) > 0 {
		// Should HandleFailed end the goroutine too, the deferred call
		// settles the chunk (step stepHandleFailed); once it has
		// returned, the deferred call has nothing to do (stepIdle).
		p.step = stepHandleFailed
		defer p.exited(ctx, chunk)
		p.handleFailedHooked(ctx, p.failed)
		p.step = stepIdle
	}
	for _, m := range p.failed {
		p.st.fail(uint8(m.Disposition()))
		m.AddTo(&p.acks)
	}
	clear(p.failed)
	p.failed = p.failed[:0]
	p.acks.Flush(ctx, p.log)
}

// chunkStopExited logs the exit of the ChunkStop hook, which ended the
// processor's goroutine once its chunk was settled: no outcome is left to
// report. It lets go of the chunk, which the loop did not clear.
func (p *worker[In, Out]) chunkStopExited(ctx context.Context) {
	p.step = stepIdle
	clear(p.buf)
	p.log.ErrorContext(ctx, ExitedLog, slog.String("while", "ChunkStop hook"), slog.Int("messages", 0),
		slog.String("stack", string(debug.Stack())))
}

// notHandedOnExited fails with message.ErrHandlerExited, counts and adds
// to p.acks the messages not handed on when user code ended the goroutine
// in the Publish of route p.handing: those it did not take (left non-nil,
// see Route) and those of the routes after it. Those acknowledged already
// or deferred owe nothing more, as in notHandedOn. It returns how many
// failed. Only the exit path gets here.
func (p *worker[In, Out]) notHandedOnExited(ctx context.Context) int {
	failed := 0
	for _, msgs := range p.pending[p.handing:] {
		for _, m := range msgs {
			if m == nil || m.Acknowledged() || m.Deferred() {
				continue
			}
			m.Fail(message.ErrHandlerExited)
			m.MarkInterrupted(ctx)
			p.st.fail(uint8(m.Disposition()))
			m.AddTo(&p.acks)
			failed++
		}
	}
	return failed
}

// notHandedOn counts and logs the handled messages a batcher did not take:
// those whose outcome the processor owes are counted with the chunk's
// unhandled messages, not as successes, and stay unacknowledged. Those
// acknowledged with the chunk already (message.AckImmediately) or
// deferred (message.Defer) owe nothing more: they count as successes, as
// they would without batchers, and the warning reports them as dropped,
// since no batch handler sees them. Only a failed Publish (a hard stop)
// gets here, so the messages' flags are read on that path alone.
func (p *worker[In, Out]) notHandedOn(ctx context.Context, batcher string, msgs []*message.Message[Out], err error) {
	dropped := 0
	for _, m := range msgs {
		if m.Acknowledged() || m.Deferred() {
			dropped++
		}
	}
	owed := len(msgs) - dropped
	p.st.chunkLeft += uint64(owed)
	attrs := []any{slog.String("batcher", batcher), slog.Int("messages", owed)}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("dropped", dropped))
	}
	p.log.WarnContext(ctx, "could not hand messages to their batcher; they stay unacknowledged", append(attrs, slog.Any("error", err))...)
}

// dropNil removes nil entries from chunk, which only a misbehaving source
// delivers (Push rejects them), so that a nil never reaches the handler.
func (p *worker[In, Out]) dropNil(chunk []*message.Message[In]) []*message.Message[In] {
	n := 0
	for _, m := range chunk {
		if m != nil {
			chunk[n] = m
			n++
		}
	}
	if n < len(chunk) {
		p.log.Error("nil messages dropped; a source delivered them", slog.Int("messages", len(chunk)-n))
		clear(chunk[n:])
	}
	return chunk[:n]
}

func (p *worker[In, Out]) route(name string) int {
	for i := range p.s.routes {
		if p.s.routes[i].Name == name {
			return i
		}
	}
	return -1
}

// convert turns m into the Message[Out] that carries out. When In and Out
// are the same type the message is reused; otherwise it comes from a slab so
// that conversion does not allocate per message.
func (p *worker[In, Out]) convert(m *message.Message[In], out Out) *message.Message[Out] {
	if p.same {
		om := any(m).(*message.Message[Out])
		om.Data = out
		return om
	}
	om := p.fromSlab()
	message.Transfer(om, m, out)
	return om
}

// fromSlab returns a fresh Message[Out] from the processor's slab.
func (p *worker[In, Out]) fromSlab() *message.Message[Out] {
	if len(p.slab) == 0 {
		p.slab = make([]message.Message[Out], max(1, slabBytes/int(unsafe.Sizeof(message.Message[Out]{}))))
	}
	om := &p.slab[0]
	p.slab = p.slab[1:]
	return om
}

func (p *worker[In, Out]) handle(ctx context.Context, m *message.Message[In]) (out Out, err error) {
	defer message.Recover(&err)
	return p.s.opts.Handle(ctx, m)
}

// prepare calls Prepare with a copy of chunk, so that what Prepare does to
// the slice itself (filtering it in place with slices.DeleteFunc, which
// clears the elements it removes, reordering or replacing elements) never
// changes which messages the processor handles and acknowledges.
func (p *worker[In, Out]) prepare(ctx context.Context, chunk []*message.Message[In]) (err error) {
	defer message.Recover(&err)
	view := p.copyOf(chunk)
	defer clear(view)
	return p.s.opts.Prepare(ctx, view)
}

// handleFailed calls HandleFailed with a copy of failed, for the same reason
// as prepare.
func (p *worker[In, Out]) handleFailed(ctx context.Context, failed []*message.Message[In]) {
	defer panics.Log(ctx, p.log, "HandleFailed panicked; acknowledging the messages as they were")
	view := p.copyOf(failed)
	defer clear(view)
	p.s.opts.HandleFailed(ctx, view)
}

// copyOf copies msgs into the worker's view buffer, which holds a whole
// chunk without growing.
func (p *worker[In, Out]) copyOf(msgs []*message.Message[In]) []*message.Message[In] {
	p.view = append(p.view[:0], msgs...)
	return p.view
}

// logFailure logs that m failed with err, within the bounds of the stage's
// failure lines (see failurelog); a failure the shutdown caused as
// interrupted.
func (p *worker[In, Out]) logFailure(ctx context.Context, m *message.Message[In], err error) {
	if pe, ok := err.(*message.PanicError); ok {
		p.s.fails.Panicked.Line(ctx, p.log,
			slog.Any("message", failurelog.Failed(m)), slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
		return
	}
	kind := &p.s.fails.Failed
	if acker.CausedByShutdown(ctx, err) {
		kind = &p.s.fails.Interrupted
	}
	kind.Line(ctx, p.log, slog.Any("message", failurelog.Failed(m)), slog.Any("error", err))
}

// ExitedLog is the message of the error line a processor logs when user
// code ended its goroutine (runtime.Goexit).
const ExitedLog = "user code ended the processor's goroutine (runtime.Goexit); failing the messages it held, another processor takes over"

// CutLog is the message of the warning a processor logs when the hard
// stop cut its chunk short: the messages it did not handle stay
// unacknowledged, for the source to deliver again. It is logged once the
// chunk's failures are settled, and not when HandleFailed ended the
// goroutine meanwhile: those messages are then failed and reported too.
const CutLog = "processor stopped by the shutdown timeout; unhandled messages of its chunk stay unacknowledged"
