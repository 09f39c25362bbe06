package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/boulevard-go/boulevard/producer"
)

// CancelGrace is how long the pipeline waits, once it has cut a drain short
// (cancelled the handlers' contexts), for the stages to return before it
// gives up on them and Stop and Run return a *ShutdownTimeoutError. Stop
// also cuts the drain short this long (at most a quarter of the time left)
// before its context's deadline, so that handlers that honour their context
// can return, and have their outcomes reported, before Stop must return.
const CancelGrace = time.Second

// Kind is the kind of goroutine a Straggler is.
type Kind string

// The kinds of goroutine that run user code and so may outlive Stop.
const (
	// KindProducerStage is a producer stage running the source's Run.
	KindProducerStage Kind = "producer stage"
	// KindProcessor is a processor running Prepare, the handler,
	// HandleFailed, the PartitionBy of the batcher it hands a message to,
	// or an acknowledger.
	KindProcessor Kind = "processor"
	// KindBatcher is a batcher partition running the batcher's Weight or
	// an acknowledger.
	KindBatcher Kind = "batcher"
	// KindBatchProcessor is a batch processor running the batch handler,
	// HandleFailed or an acknowledger.
	KindBatchProcessor Kind = "batch processor"
	// KindSourceClose is the source's Close (producer.Source).
	KindSourceClose Kind = "source Close"
	// KindDrainer is a Drainer's Drain (Options.Drainers); its Index is
	// the drainer's.
	KindDrainer Kind = "drainer"
)

// Straggler is one goroutine of the pipeline that had not returned when Stop
// or Run stopped waiting for it.
type Straggler struct {
	// Kind is what the goroutine does.
	Kind Kind
	// Stage is the stage's name: "<pipeline>.producer.<i>",
	// "<pipeline>.processor", "<pipeline>.batcher.<name>",
	// "<pipeline>.producer" for the source's Close, or "<pipeline>" for a
	// drainer.
	Stage string
	// Index is the processor, batcher partition, batch processor or
	// drainer (its index in Options.Drainers) within
	// its stage; -1 when the stage is one goroutine.
	Index int
}

// String names the goroutine, for example `processor 3 of "orders.processor"`.
func (s Straggler) String() string {
	if s.Index < 0 {
		return fmt.Sprintf("%s %q", s.Kind, s.Stage)
	}
	return fmt.Sprintf("%s %d of %q", s.Kind, s.Index, s.Stage)
}

// ShutdownTimeoutError is returned by Stop and Run when they stopped waiting
// while goroutines running user code had not returned: a handler or a
// source's Run that ignores its context, or a source's Close that ignores
// its own. It wraps ErrShutdownTimeout. When the source's Close is all that
// still runs, the drain completed and nothing was left unacknowledged; its
// message says so, and Err reports no timeout.
//
// What it names is left behind, still running. The pipeline never
// acknowledges for them what they did not handle: a processor or batch
// processor whose handler returns later reports the outcome of the message
// or batch it was handling (a failure it returns because its context was
// cancelled is interrupted: acker.ErrShutdown, acker.DispositionRetry),
// handles nothing more and returns; what was waiting behind it stays
// unacknowledged. Once the last of them has returned, the pipeline closes
// the source (with a cancelled context) and Done is closed; if one never
// returns, neither happens.
type ShutdownTimeoutError struct {
	// Pipeline is the pipeline's name.
	Pipeline string
	// Running lists the goroutines still running, producer stages first,
	// then processors, batchers and batch processors, then a drainer or
	// the source's Close. It is empty in the rare case where only the pipeline's own
	// bookkeeping was left.
	Running []Straggler
}

// Error names the pipeline and what is still running.
func (e *ShutdownTimeoutError) Error() string {
	var b strings.Builder
	if len(e.Running) == 1 && e.Running[0].Kind == KindSourceClose {
		// Every stage has returned: nothing was left unacknowledged.
		fmt.Fprintf(&b, "pipeline: shutdown timeout (pipeline %q): the drain completed but the source's Close did not return; still running: ", e.Pipeline)
	} else {
		fmt.Fprintf(&b, "%v (pipeline %q); still running: ", ErrShutdownTimeout, e.Pipeline)
	}
	if len(e.Running) == 0 {
		b.WriteString("only the pipeline's own bookkeeping")
	}
	for i, s := range e.Running {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// Unwrap returns ErrShutdownTimeout.
func (e *ShutdownTimeoutError) Unwrap() error { return ErrShutdownTimeout }

// ErrNilMessage is returned by Push when one of the messages is nil; none of
// them is pushed then.
var ErrNilMessage = errors.New("pipeline: push: nil message")

// ErrStoppedBeforeStart is returned by Start and Run on a pipeline that was
// stopped before it ever ran. It wraps ErrStopped and, since a pipeline runs
// once, ErrAlreadyStarted.
var ErrStoppedBeforeStart error = stoppedBeforeStart{}

type stoppedBeforeStart struct{}

func (stoppedBeforeStart) Error() string {
	return "pipeline: stopped before it ran; build a new one to run it"
}

func (stoppedBeforeStart) Unwrap() []error { return []error{ErrStopped, ErrAlreadyStarted} }

// errStoppedAfterRun is what Start and Run return on a pipeline that ran
// and has stopped, or is stopping (Stop was called, or it stopped by
// itself). It wraps ErrStopped and, since a pipeline runs once,
// ErrAlreadyStarted.
var errStoppedAfterRun error = stoppedAfterRun{}

type stoppedAfterRun struct{}

func (stoppedAfterRun) Error() string {
	return "pipeline: already ran and stopped (or is stopping); build a new one to run it again"
}

func (stoppedAfterRun) Unwrap() []error { return []error{ErrStopped, ErrAlreadyStarted} }

// Close phases, in Pipeline.closing.
const (
	closeNotStarted int32 = iota
	closeRunning
	closeReturned
)

// stragglers lists the goroutines running user code that have not returned.
func (p *Pipeline[In, Out]) stragglers() []Straggler {
	var out []Straggler
	if !p.prodDone.Load() {
		for _, st := range p.prod.Status() {
			if st.State != producer.StateStopped && st.State != producer.StateFailed {
				out = append(out, Straggler{Kind: KindProducerStage, Stage: st.Stage, Index: -1})
			}
		}
	}
	for _, i := range p.proc.Running() {
		out = append(out, Straggler{Kind: KindProcessor, Stage: p.proc.Name(), Index: i})
	}
	for _, b := range p.batchers {
		parts, procs := b.Running()
		for _, i := range parts {
			out = append(out, Straggler{Kind: KindBatcher, Stage: b.StageName(), Index: i})
		}
		for _, i := range procs {
			out = append(out, Straggler{Kind: KindBatchProcessor, Stage: b.StageName(), Index: i})
		}
	}
	if i := p.draining.Load(); i > 0 {
		out = append(out, Straggler{Kind: KindDrainer, Stage: p.opts.Name, Index: int(i - 1)})
	}
	if p.closing.Load() == closeRunning {
		out = append(out, Straggler{Kind: KindSourceClose, Stage: p.opts.Name + ".producer", Index: -1})
	}
	return out
}

// giveUp is called when the pipeline stops waiting for what it cancelled:
// Stop and Run return a *ShutdownTimeoutError naming what still runs. It
// hurries the source's Close (if it ever runs) and logs once.
func (p *Pipeline[In, Out]) giveUp() {
	p.giveUpOnce.Do(func() {
		err := &ShutdownTimeoutError{Pipeline: p.opts.Name, Running: p.stragglers()}
		p.mu.Lock()
		p.abandonErr = err
		p.mu.Unlock()
		p.closeCancel()
		p.log.Error("shutdown timeout: giving up on goroutines that ignore their context; they are left running",
			slog.Any("running", err.Running))
		// The stall watch is not left running with them: Stop and Run
		// return once it has returned.
		close(p.quitStalls)
		<-p.stallsDone
		close(p.abandoned)
	})
}

// watchClose gives up on the drainers and the source's Close when they
// have not returned ShutdownTimeout plus CancelGrace after the first was
// called (their context ends after ShutdownTimeout). It returns when Close
// has returned.
func (p *Pipeline[In, Out]) watchClose(returned <-chan struct{}) {
	d := p.opts.ShutdownTimeout
	if d <= math.MaxInt64-CancelGrace {
		d += CancelGrace
	} else {
		d = math.MaxInt64 // ShutdownTimeout + CancelGrace would overflow
	}
	began := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	prog := newProgress()
	defer prog.stop()
	for {
		select {
		case <-returned:
			return
		case <-t.C:
			p.giveUp()
			return
		case <-prog.c():
			p.log.Info(closingLog, slog.Duration("for", time.Since(began).Round(time.Millisecond)))
			prog.next()
		}
	}
}

// The progress lines of a stop that takes its time: the first
// progressFirst after the drain (or the source's Close) began, each later
// one twice as long after the last, at most progressMax apart, so that
// an operator waiting on a stop sees what it waits for.
const (
	progressFirst = 5 * time.Second
	progressMax   = time.Minute
)

// The messages of the progress lines.
const (
	drainingLog = "pipeline still draining"
	closingLog  = "pipeline still closing its source"
)

// progress times the progress lines of one wait.
type progress struct {
	t     *time.Timer
	every time.Duration
}

func newProgress() *progress {
	return &progress{t: time.NewTimer(progressFirst), every: progressFirst}
}

func (g *progress) c() <-chan time.Time { return g.t.C }

// next sets the timer for the line after the one just logged.
func (g *progress) next() {
	g.every = min(2*g.every, progressMax)
	g.t.Reset(g.every)
}

func (g *progress) stop() { g.t.Stop() }

// logDraining logs what a drain that began at began still waits for: the
// messages the producer stages, the processors and the batchers hold,
// queued and in flight as their Stats (and metrics) count them.
func (p *Pipeline[In, Out]) logDraining(began time.Time) {
	st := p.Stats()
	buffered, batching, batchQueued := 0, 0, 0
	for _, ps := range st.Producers {
		buffered += ps.Buffered
	}
	for _, bs := range st.Batchers {
		batching += bs.InFlight
		batchQueued += bs.Queued
	}
	elapsed := time.Since(began)
	p.log.Info(drainingLog, slog.Duration("for", elapsed.Round(time.Millisecond)),
		slog.Duration("cut_short_in", max(p.opts.ShutdownTimeout-elapsed, 0).Round(time.Millisecond)),
		slog.Int("producers_buffered", buffered),
		slog.Int("processors_queued", st.Processors.Queued),
		slog.Int("processors_in_flight", st.Processors.InFlight),
		slog.Int("batchers_queued", batchQueued),
		slog.Int("batchers_in_flight", batching))
}

// stopResult is what Stop and Run return once they stop waiting: the
// pipeline's errors, with the *ShutdownTimeoutError in place of
// ErrShutdownTimeout when goroutines are left running.
func (p *Pipeline[In, Out]) stopResult(timeout *ShutdownTimeoutError) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if timeout == nil {
		select {
		case <-p.done: // the stragglers have returned since
		default:
			timeout = p.abandonErr
		}
	}
	errs := make([]error, 0, len(p.errs)+1)
	for _, e := range p.errs {
		if timeout != nil && e == ErrShutdownTimeout {
			continue
		}
		errs = append(errs, e)
	}
	if timeout != nil {
		errs = append(errs, timeout)
		p.timedOut.Store(true)
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// stopEarly returns a channel that fires CancelGrace (at most a quarter of
// the time left) before ctx's deadline, and a function to release its
// timer; nil when ctx has no deadline.
func stopEarly(ctx context.Context) (<-chan time.Time, func() bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return nil, func() bool { return false }
	}
	left := time.Until(d)
	t := time.NewTimer(left - min(CancelGrace, left/4))
	return t.C, t.Stop
}
