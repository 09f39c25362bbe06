package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// and does not stop the others or the source's Close.
func (p *Pipeline[In, Out]) drainAndClose(ctx context.Context) error {
	for i, d := range p.opts.Drainers {
		p.draining.Store(int32(i) + 1)
		err := d.Drain(ctx)
		p.draining.Store(0)
		if err != nil {
			p.log.Error("draining before closing the source failed", slog.Int("drainer", i), slog.Any("error", err))
			p.setErr(&DrainError{Index: i, Err: err})
		}
	}
	p.closing.Store(closeRunning)
	return p.prod.Close(ctx)
}
