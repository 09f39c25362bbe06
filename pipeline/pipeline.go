// Package pipeline declares and runs Broadway-style pipelines: producer
// stages pull messages from a source under a permit window, processors handle
// them one by one, batchers group them, batch processors handle the groups,
// and every message's outcome is acknowledged to the source it came from.
//
// A pipeline is built once with New (which validates every option), started
// with Start or Run, and stopped with Stop, which drains: sources stop
// fetching, every message in flight is handled and acknowledged, batches are
// flushed, and only then are the sources closed. Stop returns by its
// context's deadline whatever user code does; a drain cut short leaves what
// it did not handle unacknowledged, for the broker to deliver again, and
// never acknowledges it as handled.
package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/group"
	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/internal/release"
	"github.com/boulevard-go/boulevard/internal/sourcewire"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

var (
	// ErrAlreadyStarted is returned by Start on a pipeline that was started,
	// or stopped, before. A pipeline runs once; build a new one to run again.
	// Once the pipeline is stopping or has stopped, the error Start and Run
	// return wraps ErrStopped too, and says so.
	ErrAlreadyStarted = errors.New("pipeline: already started")
	// ErrNotStarted is returned by Push and Test before Start.
	ErrNotStarted = errors.New("pipeline: not started")
	// ErrStopped is returned by Push and Test once the pipeline no longer
	// accepts messages.
	ErrStopped = errors.New("pipeline: stopped")
	// ErrShutdownTimeout is returned by Stop and Run when the drain did not
	// finish within ShutdownTimeout (or the context given to Stop): the
	// messages still in flight were left unacknowledged. When goroutines
	// running user code were also left running, the error is a
	// *ShutdownTimeoutError naming them, which wraps ErrShutdownTimeout.
	// When Stop returns because its context ended, the error wraps the
	// context's error too (context.DeadlineExceeded or context.Canceled).
	ErrShutdownTimeout = errors.New("pipeline: shutdown timeout: messages in flight were left unacknowledged")
	// ErrNotBuilt is returned by Start, Run, Stop, Push and the rate-limit
	// methods of a Pipeline that New did not build (a zero Pipeline): it
	// has nothing to run.
	ErrNotBuilt = errors.New("pipeline: not built by New")
	// ErrNilContext is returned by Start, Run, Stop, Push and the Test
	// methods when given a nil context; the pipeline is left as it was.
	ErrNilContext = errors.New("pipeline: nil context")
)

type state uint8

const (
	stateNew state = iota
	stateRunning
	stateDone
)

// CloseCutShortLog is the WARN line of a source's Close that returned its
// context's error after a drain the shutdown timeout cut short: the
// pipeline called Close with a context already ended, as it does then
// (see Stop), so what Close could not finish in no time the source
// finishes on its own or the broker delivers again.
const CloseCutShortLog = "closing the source with its context already ended, after a drain cut short"

// Pipeline is a running (or runnable) pipeline. Its methods are safe for
// concurrent use. Build one with New: a Pipeline that New did not build (the
// zero Pipeline) never runs; its methods that can fail return ErrNotBuilt,
// the others describe an empty pipeline, and Done is closed.
type Pipeline[In, Out any] struct {
	opts     Options[In, Out]
	log      *slog.Logger
	prod     producerRuntime[In]
	proc     *processing.Pool[In, Out]
	batchers []*batching.Batcher[Out]

	mu          sync.Mutex
	state       state
	neverRan    bool    // Stop came before Start
	starting    bool    // Start is calling the PipelineStart hook
	errs        []error // what stopped the pipeline abnormally, see Err
	abandonErr  *ShutdownTimeoutError
	hardCancel  context.CancelFunc // cancels the stages: the drain is cut short
	closeCancel context.CancelFunc // cancels the context of the source's Close
	stopOnce    sync.Once
	stopReq     chan struct{} // closed when a stop is requested
	stagesDone  chan struct{} // closed when every stage goroutine has returned
	cutOnce     sync.Once
	cut         chan struct{} // closed when the drain is cut short
	giveUpOnce  sync.Once
	abandoned   chan struct{} // closed when Stop and Run stop waiting for stragglers
	timedOut    atomic.Bool   // Stop or Run returned a *ShutdownTimeoutError, see Stats
	closing     atomic.Int32  // closeNotStarted, closeRunning, closeReturned
	draining    atomic.Int32  // 1 + the index of the Drainer being drained; 0 when none
	prodDone    atomic.Bool   // the producer's Run has returned
	done        chan struct{} // closed when the pipeline has stopped
	startedAt   atomic.Int64  // Unix nanoseconds of Start, for Stats
	quitStalls  chan struct{} // closed by giveUp: the stall watch returns
	stallsDone  chan struct{} // closed when the stall watch has returned
}

// New validates opts and builds the pipeline. Nothing starts until Start or
// Run. An invalid option is reported as a validate.Errors value listing every
// broken rule.
func New[In, Out any](opts Options[In, Out]) (*Pipeline[In, Out], error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := cmp.Or(opts.Logger, slog.Default())
	log = log.With(slog.String("pipeline", opts.Name))
	p := &Pipeline[In, Out]{
		opts:       opts,
		log:        log,
		stopReq:    make(chan struct{}),
		stagesDone: make(chan struct{}),
		cut:        make(chan struct{}),
		abandoned:  make(chan struct{}),
		done:       make(chan struct{}),
		quitStalls: make(chan struct{}),
		stallsDone: make(chan struct{}),
	}
	routes := make([]processing.NamedRoute[Out], 0, len(opts.Batchers))
	// A source that releases a feed and waits for its messages in flight
	// has the batchers emit their open batches at once (none to tell
	// without batchers).
	var rel *release.Signal
	if len(opts.Batchers) > 0 {
		rel = &release.Signal{}
	}
	for _, bo := range opts.Batchers {
		bo.Handle = watchTestBatches(bo.Handle)
		b := batching.New(bo, batching.Config{Name: opts.Name, Logger: log, Hooks: opts.Telemetry, FailureLogInterval: opts.FailureLogInterval,
			Release: rel})
		p.batchers = append(p.batchers, b)
		routes = append(routes, processing.NamedRoute[Out]{Name: bo.Name, Route: b})
	}
	p.proc = processing.New(opts.Processors, processing.Config[Out]{Name: opts.Name, Logger: log, Hooks: opts.Telemetry, Routes: routes,
		MinQueue: opts.Producer.Flow.MaxWindow(), FailureLogInterval: opts.FailureLogInterval})
	p.prod = sourcewire.New(opts.Producer, opts.Name, log, p.proc, rel).(producerRuntime[In])
	return p, nil
}

// Start launches every stage and returns at once. ctx only carries values
// (for example tracing) to the stages: cancelling it does not stop the
// pipeline; call Stop for that, or use Run. A pipeline runs once: Start
// on one that was started returns ErrAlreadyStarted, with ErrStopped
// wrapped too once it is stopping or has stopped.
//
// A nil ctx returns ErrNilContext, the pipeline left as it was.
func (p *Pipeline[In, Out]) Start(ctx context.Context) error {
	return p.start(ctx, nil)
}

// start is Start; runCtx is Run's context (nil from Start), which the
// pipeline watches itself when the PipelineStart hook ends the goroutine
// that called Run: that goroutine no longer does.
func (p *Pipeline[In, Out]) start(ctx, runCtx context.Context) error {
	if !p.built() {
		return ErrNotBuilt
	}
	if ctx == nil {
		return ErrNilContext
	}
	p.mu.Lock()
	if p.neverRan {
		p.mu.Unlock()
		return ErrStoppedBeforeStart
	}
	if p.state != stateNew {
		stopping := p.state == stateDone || queue.IsDone(p.stopReq)
		p.mu.Unlock()
		if stopping {
			return errStoppedAfterRun
		}
		return ErrAlreadyStarted
	}
	p.state = stateRunning
	p.starting = true
	p.startedAt.Store(time.Now().UnixNano())
	base := context.WithoutCancel(ctx)
	hardCtx, cancel := context.WithCancel(base)
	p.hardCancel = cancel
	closeCtx, closeCancel := context.WithCancel(base)
	p.closeCancel = closeCancel
	p.mu.Unlock()

	register(p.opts.Name, p)
	// Deferred, so that the pipeline runs even when the PipelineStart
	// hook ends the caller's goroutine (runtime.Goexit): Stop, Run and
	// Done then work as usual, though Start never returns to its caller,
	// and Run's context stops the pipeline as it would have stopped Run.
	hookReturned := false
	defer func() {
		var watch context.Context
		if !hookReturned {
			watch = runCtx
		}
		p.launch(hardCtx, closeCtx, watch)
	}()
	// Without p.mu, so that the hook may read the pipeline (Stats, Err,
	// SourceStatus); before run, so that PipelineStart precedes
	// PipelineStop.
	p.hookStart(ctx)
	hookReturned = true
	return nil
}

// launch starts run once the PipelineStart hook has returned (or ended
// its goroutine). A non-nil runCtx is the context of a Run whose
// goroutine the hook ended: run then requests a stop when it ends.
func (p *Pipeline[In, Out]) launch(hardCtx, closeCtx, runCtx context.Context) {
	p.mu.Lock()
	p.starting = false
	p.mu.Unlock()
	if queue.IsDone(p.stopReq) {
		// Stopped while the hook ran (see Stop): the sources start
		// stopped, and the stages drain what was pushed meanwhile.
		p.prod.StopFetching()
	}
	go p.run(hardCtx, closeCtx, runCtx)
	p.log.Info("pipeline started", slog.Any("topology", p.Topology()))
}

// run owns every goroutine of the pipeline: it launches the stages, each
// closing the input of the stage after it once it has returned, the stall
// watch and the shutdown-timeout enforcer, waits for them, then closes the
// sources and closes Done as the last thing it does. Stop and Run wait for Done (or
// give up on it, see ShutdownTimeoutError). A non-nil runCtx (see launch)
// is watched in place of the Run that no longer does.
func (p *Pipeline[In, Out]) run(hardCtx, closeCtx, runCtx context.Context) {
	started := time.Now()
	var stages, aux group.Group
	if p.opts.StallCheckInterval > 0 {
		aux.Go(p.watchStalls)
	} else {
		close(p.stallsDone) // turned off: giveUp has none to wait for
	}
	aux.Go(p.enforceShutdownTimeout)
	if runCtx != nil {
		aux.Go(func() { p.stopWhenDone(runCtx) })
	}
	stages.Go(func() {
		p.prod.Run(hardCtx, p.fatal)
		p.prodDone.Store(true)
		p.proc.CloseInput()
	})
	stages.Go(func() {
		p.proc.Run(hardCtx)
		for _, b := range p.batchers {
			b.CloseInput()
		}
	})
	for _, b := range p.batchers {
		stages.Go(func() { b.Run(hardCtx) })
	}
	stages.Wait()
	close(p.stagesDone)
	aux.Wait()
	select {
	case <-p.cut:
		// The messages still in flight get no outcome from the stages
		// now: the source's Close need not wait for them.
		p.prod.Abandon()
	default:
	}

	// Every outcome has been delivered, once the drainers have settled
	// theirs: the sources may let go of their connections. The drainers
	// and Close share ShutdownTimeout, cut short by Stop's ctx.
	closeCtx, cancel := context.WithTimeout(closeCtx, p.opts.ShutdownTimeout)
	closed := make(chan struct{})
	aux.Go(func() { p.watchClose(closed) })
	cutBefore := closeCtx.Err()
	err := p.drainAndClose(closeCtx)
	p.closing.Store(closeReturned)
	close(closed)
	aux.Wait()
	if err != nil {
		if cutBefore != nil && errors.Is(err, cutBefore) {
			// The drain was cut short, and the stop reports it: the
			// source's Close had no time at all, as expected.
			p.log.Warn(CloseCutShortLog, slog.Any("error", err))
		} else {
			p.log.Error("closing the source failed", withStack(err, slog.Any("error", err))...)
		}
		p.setErr(fmt.Errorf("pipeline: closing the source: %w", err))
	}
	cancel()
	p.closeCancel()
	p.hardCancel()

	p.mu.Lock()
	p.state = stateDone
	p.mu.Unlock()
	p.log.Info("pipeline stopped")
	unregister(p)
	// Deferred, so that Done closes even when the PipelineStop hook ends
	// this goroutine (runtime.Goexit).
	defer close(p.done)
	p.hookStop(started)
}

// stopWhenDone requests a stop when ctx ends, as Run does, unless the
// stages have returned first: it watches the context of a Run whose
// goroutine the PipelineStart hook ended (runtime.Goexit).
func (p *Pipeline[In, Out]) stopWhenDone(ctx context.Context) {
	select {
	case <-ctx.Done():
		p.requestStop()
	case <-p.stagesDone:
	}
}

// enforceShutdownTimeout starts the drain when a stop is requested and cuts it
// short when it takes longer than ShutdownTimeout.
func (p *Pipeline[In, Out]) enforceShutdownTimeout() {
	select {
	case <-p.stagesDone:
		return
	case <-p.stopReq:
	}
	p.log.Info("pipeline draining", slog.Duration("shutdown_timeout", p.opts.ShutdownTimeout))
	p.prod.StopFetching()
	began := time.Now()
	t := time.NewTimer(p.opts.ShutdownTimeout)
	defer t.Stop()
	prog := newProgress()
	defer prog.stop()
wait:
	for {
		select {
		case <-p.stagesDone:
			return
		case <-t.C:
			p.cutShort()
			break wait
		case <-p.cut: // by Stop's ctx
			break wait
		case <-prog.c():
			p.logDraining(began)
			prog.next()
		}
	}
	// The handlers' contexts are cancelled: give them CancelGrace to
	// return before Stop and Run stop waiting for them.
	g := time.NewTimer(CancelGrace)
	defer g.Stop()
	select {
	case <-p.stagesDone:
	case <-g.C:
		p.giveUp()
	}
}

// cutShort ends a drain that takes too long: handlers' contexts are
// cancelled and what is left stays unacknowledged. Once the drain is complete
// there is nothing to cut, and no timeout to report.
func (p *Pipeline[In, Out]) cutShort() {
	if p.cutDrain() {
		p.log.Warn(cutShortLog)
	}
}

// cutShortBy cuts the drain short like cutShort, but waits for its log
// line, which goes to the user's logger and may block, only until ctx
// ends.
func (p *Pipeline[In, Out]) cutShortBy(ctx context.Context) {
	if !p.cutDrain() {
		return
	}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		p.log.Warn(cutShortLog)
	}()
	select {
	case <-logged:
	case <-ctx.Done():
	}
}

const cutShortLog = "shutdown timeout passed; stopping handlers and leaving unhandled messages unacknowledged"

// cutDrain cancels the handlers and closes the processors' input, once
// and without blocking; it reports whether this call did it.
func (p *Pipeline[In, Out]) cutDrain() bool {
	select {
	case <-p.stagesDone:
		return false
	default:
	}
	did := false
	p.cutOnce.Do(func() {
		did = true
		p.setErr(ErrShutdownTimeout)
		p.hardCancel()
		// The processors take nothing more: Push now returns ErrStopped
		// rather than queueing messages nobody will handle, even while a
		// source's Run that ignores its context keeps the producer's Run
		// (which closes this input otherwise) from returning.
		p.proc.CloseInput()
		close(p.cut)
	})
	return did
}

func (p *Pipeline[In, Out]) setErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errs {
		if errors.Is(e, err) {
			return
		}
	}
	p.errs = append(p.errs, err)
}

// fatal is called by a producer stage that gave up on its source.
func (p *Pipeline[In, Out]) fatal(err error) {
	p.setErr(err)
	p.requestStop()
}

func (p *Pipeline[In, Out]) requestStop() {
	p.stopOnce.Do(func() { close(p.stopReq) })
}

// Stop drains the pipeline and waits until it has stopped: sources stop
// fetching, every message in flight is handled and acknowledged (open
// batches are emitted with trigger flush), then the Drainers are drained
// and the sources are closed.
//
// Stop returns by ctx's deadline (or as soon as ctx is cancelled), whatever
// user code does. The drain is cut short (the handlers' contexts are
// cancelled) when ShutdownTimeout passes, or CancelGrace (at most a quarter
// of the time left) before ctx's deadline, or when ctx is cancelled,
// whichever is first; what is left then stays unacknowledged and Stop
// returns ErrShutdownTimeout, wrapping ctx.Err() too when Stop returns
// because ctx ended (errors.Is finds both). The source's Close (see producer.Source) gets
// its own ShutdownTimeout, and its context is cancelled at the same point
// before ctx's deadline, or when ctx is cancelled.
// Whatever ctx says, Stop stops waiting for goroutines that ignore their
// context CancelGrace after the drain was cut short, and for a Close that
// ignores its own CancelGrace after its ShutdownTimeout. When it returns
// while such goroutines still run, the error is a *ShutdownTimeoutError
// naming them, and its documentation says what they may still do; in every
// other case no goroutine of the pipeline is left when Stop returns.
//
// Stop also returns the error that stopped the pipeline by itself, if any
// (a *producer.RestartError), a *DrainError for each Drainer that failed,
// and an error from the source's Close. Stop
// may be called more than once and before Start (a pipeline stopped before
// it ran refuses Start with ErrStoppedBeforeStart).
//
// Called while Start is calling the PipelineStart hook (from the hook
// itself, say), Stop does not wait, since no stage runs before the hook
// returns: it returns nil at once, and the pipeline stops as soon as the
// hook has returned (its sources start stopped, and what was pushed
// meanwhile is handled and acknowledged); Done is closed once it has
// stopped, and a later Stop waits for that as usual. Calling Stop from a
// handler, an acknowledger or another telemetry hook of the pipeline would
// wait for that very call: call it from another goroutine.
//
// A nil ctx returns ErrNilContext, the pipeline left as it was.
func (p *Pipeline[In, Out]) Stop(ctx context.Context) error {
	if !p.built() {
		return ErrNotBuilt
	}
	if ctx == nil {
		return ErrNilContext
	}
	p.mu.Lock()
	if p.state == stateNew {
		p.state = stateDone
		p.neverRan = true
		close(p.done)
		p.mu.Unlock()
		return nil
	}
	starting := p.starting
	p.mu.Unlock()
	p.requestStop()
	if starting {
		// Waiting would wait for the hook, which may be the caller.
		return nil
	}
	early, release := stopEarly(ctx)
	defer release()
	select {
	case <-p.done:
		return p.stopResult(nil)
	case <-p.abandoned:
		return p.stopResult(nil)
	case <-early:
		// Leave the cancelled handlers, or the source's Close, time to
		// return before ctx ends.
		p.cutShortBy(ctx)
		p.closeCancel()
		select {
		case <-p.done:
			return p.stopResult(nil)
		case <-p.abandoned:
			return p.stopResult(nil)
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
	// The caller stops waiting: cut the drain short if it is still going,
	// and hurry the source's Close.
	p.cutShortBy(ctx)
	p.closeCancel()
	var err error
	select {
	case <-p.done:
		err = p.stopResult(nil)
	default:
		err = p.stopResult(&ShutdownTimeoutError{Pipeline: p.opts.Name, Running: p.stragglers()})
	}
	if errors.Is(err, ErrShutdownTimeout) {
		// ctx's end cut the drain short: say so.
		err = fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return err
}

// Run starts the pipeline and blocks until ctx is cancelled, then drains it
// like Stop with a context that never ends: the drain is cut short after
// ShutdownTimeout, and Run stops waiting for goroutines that ignore their
// context CancelGrace later (or for a source's Close that ignores its own,
// CancelGrace after its ShutdownTimeout), returning a *ShutdownTimeoutError
// that names them. It also returns when the pipeline stops by itself: when
// every source is exhausted and everything is handled (nil), or when a
// source failed too often (a *producer.RestartError).
//
// When the PipelineStart hook ends Run's goroutine (runtime.Goexit), Run
// never returns to its caller, but ctx keeps its meaning: cancelling it
// stops and drains the pipeline as it would have; Done closes once it has
// stopped, and Err tells what Run would have returned (bar a
// *ShutdownTimeoutError, which the pipeline logs).
//
// A nil ctx returns ErrNilContext, the pipeline left as it was.
func (p *Pipeline[In, Out]) Run(ctx context.Context) error {
	if err := p.start(ctx, ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return p.Stop(context.WithoutCancel(ctx))
	case <-p.done:
	case <-p.abandoned:
	}
	return p.stopResult(nil)
}

// Done is closed when the pipeline has stopped and every goroutine it started
// has returned. After a *ShutdownTimeoutError it is closed only once the
// goroutines it names have returned, if ever.
func (p *Pipeline[In, Out]) Done() <-chan struct{} {
	if !p.built() {
		return closedChan
	}
	return p.done
}

// closedChan is what Done returns for a Pipeline that New did not build.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// built reports whether New built p; the fields it sets are never reset.
func (p *Pipeline[In, Out]) built() bool { return p.done != nil }

// Err returns what stopped the pipeline abnormally: a *producer.RestartError,
// ErrShutdownTimeout, a *DrainError, a source Close error, or several
// joined; nil otherwise.
func (p *Pipeline[In, Out]) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch len(p.errs) {
	case 0:
		return nil
	case 1:
		return p.errs[0]
	}
	return errors.Join(p.errs...)
}

// Push hands messages to the processors directly, bypassing the producer
// stages (Broadway's push_messages): for user code that receives messages by
// other means, such as an HTTP handler. Each message's outcome goes to the
// acknowledger it carries; a message created without one (a nil
// acknowledger, or a zero Message) is acknowledged to acker.Discard. A nil
// message is refused: Push then returns an error wrapping ErrNilMessage and
// pushes none of msgs. Push blocks while the processors are busy. It
// returns an error wrapping ctx.Err() if ctx ends first, and one wrapping
// ErrStopped once the pipeline no longer accepts messages (ErrNotStarted
// before Start); when some messages were taken, the error says how many.
// Without PartitionBy those are the first ones of msgs; with PartitionBy
// they need not be, so rely on the acknowledgers to learn which messages were
// handled rather than pushing a suffix again. With PartitionBy, msgs is
// taken a window at a time (what the processors' queues hold together),
// so that once ctx ends Push computes no more keys and returns.
//
// PartitionBy runs on the goroutine that called Push. When it ends that
// goroutine (runtime.Goexit), the messages the processors had not taken
// fail with message.ErrHandlerExited and go to their acknowledgers, and
// the pipeline logs one error line (PushExitedLog); Push does not return.
//
// A nil ctx returns ErrNilContext, the pipeline left as it was.
func (p *Pipeline[In, Out]) Push(ctx context.Context, msgs ...*message.Message[In]) error {
	p.mu.Lock()
	st := p.state
	p.mu.Unlock()
	switch st {
	case stateNew:
		if !p.built() {
			return ErrNotBuilt
		}
		return ErrNotStarted
	case stateDone:
		return ErrStopped
	}
	if ctx == nil {
		return ErrNilContext
	}
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("%w: message %d of %d", ErrNilMessage, i, len(msgs))
		}
	}
	progress, pushing := 0, true
	defer func() {
		if pushing {
			p.pushExited(ctx, msgs[progress:])
		}
	}()
	n, err := p.proc.PublishProgress(ctx, msgs, &progress, nil, time.Time{})
	pushing = false
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrClosed):
		return fmt.Errorf("%w: %d of %d messages pushed", ErrStopped, n, len(msgs))
	default:
		return fmt.Errorf("pipeline: push: %d of %d messages pushed: %w", n, len(msgs), err)
	}
}

// PushExitedLog is the error line a pipeline logs when its processors'
// PartitionBy ends the goroutine that called Push (runtime.Goexit).
const PushExitedLog = "user code ended the goroutine of Push (runtime.Goexit) in the processors' PartitionBy; the messages not taken fail"

// pushExited gives their outcome to the messages of a Push the
// processors had not taken when PartitionBy ended its goroutine.
func (p *Pipeline[In, Out]) pushExited(ctx context.Context, rest []*message.Message[In]) {
	p.log.ErrorContext(ctx, PushExitedLog, slog.Int("messages", len(rest)), slog.String("stack", string(debug.Stack())))
	p.proc.FailExited(ctx, rest)
}

// SetRateLimit changes the rate limit shared by every producer stage while
// the pipeline runs; nil removes it. An invalid limit is rejected.
func (p *Pipeline[In, Out]) SetRateLimit(rl *producer.RateLimit) error {
	if !p.built() {
		return ErrNotBuilt
	}
	if rl != nil {
		if err := validate.Struct("rateLimit", rl); err != nil {
			return err
		}
	}
	p.prod.SetRateLimit(rl)
	return nil
}

// RateLimit returns a copy of the rate limit in force (the configured one, or
// the last one SetRateLimit set), or nil when there is none.
func (p *Pipeline[In, Out]) RateLimit() *producer.RateLimit {
	if !p.built() {
		return nil
	}
	return p.prod.RateLimit()
}

// SourceStatus returns the state of every producer stage, in stage order
// (none for a push-only pipeline): whether its source is connecting,
// running, restarting after a failure (with the restart count, the failures
// in a row and the last error), stopped or failed. It is a snapshot, safe to
// call from any goroutine at any time, and cheap enough to back a health
// check polled every second: one short lock per stage, no I/O.
func (p *Pipeline[In, Out]) SourceStatus() []producer.StageStatus {
	if !p.built() {
		return nil
	}
	st := p.prod.Status()
	p.mu.Lock()
	over := p.state == stateDone
	p.mu.Unlock()
	for i := range st {
		if over && st[i].State == producer.StateStarting {
			// Stopped before Start: the stage never ran.
			st[i].State = producer.StateStopped
		}
	}
	return st
}
