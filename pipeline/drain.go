package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/message"
)

// Drainer is something the pipeline waits for before it closes its source:
// work its handlers started that settles messages after they returned. A
// topic sink (package topic/sink) is one: with ack propagation it defers
// the messages it publishes and reports their outcomes when the downstream
// pipeline has handled them, so the source must stay open until then.
type Drainer interface {
	// Drain waits, until ctx ends, for the work to settle, then lets go of
	// it: once it has returned, the pipeline no longer waits for
	// outcomes from it. It returns ctx.Err() when it stopped waiting.
	// It runs on a goroutine of its own: a panic in it is a failed
	// drain with a *message.PanicError, and an end of its goroutine
	// (runtime.Goexit) one with a *DrainExitError.
	Drain(ctx context.Context) error
}

// ErrDrain wraps the error of a Drainer whose Drain failed (for example
// because the shutdown timeout cut its wait short): Stop, Run and Err
// return it.
var ErrDrain = errors.New("pipeline: draining before closing the source")

// DrainError is the error of one Drainer: it wraps ErrDrain and what Drain
// returned.
type DrainError struct {
	// Index is the drainer's index in Options.Drainers.
	Index int
	// Err is what its Drain returned.
	Err error
}

// Error names the drainer, for example
// "pipeline: draining before closing the source: drainers[0]: context deadline exceeded".
func (e *DrainError) Error() string {
	return fmt.Sprintf("%v: drainers[%d]: %v", ErrDrain, e.Index, e.Err)
}

// Unwrap returns ErrDrain and Drain's error.
func (e *DrainError) Unwrap() []error { return []error{ErrDrain, e.Err} }

// drainAndClose drains Options.Drainers in order, then closes the source,
// all with ctx (bounded by ShutdownTimeout). A failed drain is reported
// and does not stop the others or the source's Close; so is a Drain that
// panics or ends its goroutine (see drain).
func (p *Pipeline[In, Out]) drainAndClose(ctx context.Context) error {
	for i, d := range p.opts.Drainers {
		p.draining.Store(int32(i) + 1)
		err := drain(ctx, d)
		p.draining.Store(0)
		if err != nil {
			p.log.Error("draining before closing the source failed", drainStack(err, slog.Int("drainer", i), slog.Any("error", err))...)
			p.setErr(&DrainError{Index: i, Err: err})
		}
	}
	p.closing.Store(closeRunning)
	return p.prod.Close(ctx)
}

// drain calls d.Drain(ctx) on a goroutine of its own and returns its
// error: a panic is recovered as a *message.PanicError, and an exit
// (runtime.Goexit, as t.FailNow does) is a *DrainExitError, both with the
// stack. It costs a goroutine per drainer and stop.
func drain(ctx context.Context, d Drainer) error {
	return panics.Isolate(func() (err error) {
		defer message.Recover(&err)
		return d.Drain(ctx)
	}, func(stack []byte) error { return &DrainExitError{Stack: stack} })
}

// DrainExitError is the error of a Drain that ended its goroutine with
// runtime.Goexit (t.FailNow does, in a test's fake drainer) before
// returning: the pipeline calls Drain on a goroutine of its own, so the
// exit ends only that one and is a failed drain (the Err of its
// *DrainError). It wraps message.ErrHandlerExited.
type DrainExitError struct {
	// Stack is the stack of the goroutine at the exit.
	Stack []byte
}

// Error says that Drain exited.
func (e *DrainExitError) Error() string {
	return "the drainer's Drain ended its goroutine (runtime.Goexit) before returning"
}

// Unwrap returns message.ErrHandlerExited.
func (e *DrainExitError) Unwrap() error { return message.ErrHandlerExited }

// drainStack returns attrs, followed by a "stack" attribute when err
// carries the stack of a panic or an exit.
func drainStack(err error, attrs ...any) []any {
	var de *DrainExitError
	if errors.As(err, &de) {
		return append(attrs, slog.String("stack", string(de.Stack)))
	}
	return withStack(err, attrs...)
}
