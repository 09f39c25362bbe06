// Package acker defines how a message's outcome travels back to the source
// it came from.
//
// Every message carries a reference to an Acknowledger (set by its source)
// plus the source's per-message ack data. The stage that finishes a message
// (a processor when the message fails there or goes to no batcher, otherwise
// a batch processor) groups the outcomes of one chunk or batch by acknowledger and
// calls each acknowledger once with all of its successful and failed
// messages: one call per acknowledger per chunk or batch, never one call per
// message.
//
// The package is a leaf: it knows nothing about message payloads, so sources,
// stages and tests can all share it.
package acker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// ErrShutdown is wrapped by the error of a failed outcome whose failure the
// pipeline's own shutdown caused: the handler's context was cancelled by
// Stop or by the shutdown timeout, and the handler returned an error that is
// or wraps context.Canceled or context.DeadlineExceeded. Such an outcome
// always carries DispositionRetry, whatever a failure hook set: the message
// was not handled, so no built-in source commits or acknowledges it; it is
// left for the broker to deliver again. Use Interrupted to test an Outcome.
var ErrShutdown = errors.New("acker: interrupted by the pipeline's shutdown")

// ErrNilContext is what [Recorder.Wait] returns for a nil context.
var ErrNilContext = errors.New("acker: nil context")

// Interrupted reports whether o failed because the pipeline shut down while
// it was being handled (its error wraps ErrShutdown).
func Interrupted(o Outcome) bool { return o.Err != nil && errors.Is(o.Err, ErrShutdown) }

// ShutdownError is the error of a failed outcome whose failure the
// pipeline's shutdown caused. It wraps both ErrShutdown and the error the
// handler returned, so errors.Is(err, ErrShutdown) and, for example,
// errors.Is(err, context.Canceled) both hold.
type ShutdownError struct {
	// Err is the error the handler (or hook) failed the message with.
	Err error
}

// Error names the shutdown and the handler's error.
func (e *ShutdownError) Error() string { return ErrShutdown.Error() + ": " + e.Err.Error() }

// Unwrap returns ErrShutdown and the handler's error.
func (e *ShutdownError) Unwrap() []error { return []error{ErrShutdown, e.Err} }

// WrapShutdown returns err wrapped in a *ShutdownError, or err itself when
// it already wraps ErrShutdown. A nil err stays nil.
func WrapShutdown(err error) error {
	if err == nil || errors.Is(err, ErrShutdown) {
		return err
	}
	return &ShutdownError{Err: err}
}

// CausedByShutdown reports whether err, returned by user code that was given
// ctx by a pipeline stage, is a failure the pipeline's shutdown caused: ctx
// is done (the pipeline cancels it only when it cuts a drain short) and err
// is or wraps context.Canceled or context.DeadlineExceeded. A handler's own
// deadline that passes while the pipeline runs is not one: ctx is not done.
// It has no error to return: a nil ctx panics when err is not nil.
func CausedByShutdown(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// Acknowledger receives the outcomes of messages that came from one source
// (or one consumer of a source).
//
// Ack is called with the messages that succeeded and those that failed; each
// failed Outcome carries its error. Either slice may be empty, never both.
// The slices and the Outcome values in them are only valid during the call:
// an implementation that keeps them must copy them. Ack may be called from
// several goroutines at once and must be safe for that. Ack may block (for
// example to commit offsets); ctx is cancelled when the pipeline's shutdown
// timeout passes. A panic in Ack is recovered and logged by the caller; the
// outcomes it was given are then lost to that acknowledger.
//
// Implementations should be comparable (pointer types are the usual
// choice), because outcomes are grouped by acknowledger identity. A value
// that cannot be compared (a struct holding a slice or a map, or an
// interface field holding one) cannot be grouped: Group calls it once per
// outcome rather than once per chunk or batch, each outcome still exactly
// once.
type Acknowledger interface {
	Ack(ctx context.Context, successful, failed []Outcome)
}

// Disposition is how a failed message should be acknowledged. Sources
// document what each disposition does for them; the failure hook of a stage
// may change it before the message is acknowledged.
type Disposition uint8

const (
	// DispositionDefault applies the source's documented failure policy.
	DispositionDefault Disposition = iota
	// DispositionRetry asks the source to deliver the message again
	// (for example: do not advance a Kafka offset, nack a Pulsar message).
	DispositionRetry
	// DispositionDiscard tells the source the message is done with, even
	// though it failed (for example: commit past a Kafka offset, ack a Pulsar
	// message), so a poison message cannot stall its partition.
	DispositionDiscard
)

// String returns "default", "retry" or "discard".
func (d Disposition) String() string {
	switch d {
	case DispositionDefault:
		return "default"
	case DispositionRetry:
		return "retry"
	case DispositionDiscard:
		return "discard"
	}
	return fmt.Sprintf("Disposition(%d)", uint8(d))
}

// Outcome is what an Acknowledger learns about one message.
type Outcome struct {
	// ID is the source's per-message identifier, set when the message was
	// created (an offset, a sequence number, …).
	ID uint64
	// Data is the source's per-message ack data, set when the message was
	// created (for example a Pulsar message id); nil when the source needs
	// none.
	Data any
	// Err is why the message failed; nil for successful messages.
	Err error
	// Disposition is how a failed message should be acknowledged;
	// DispositionDefault for successful messages.
	Disposition Disposition
	// Message is the *message.Message[T] as the last stage saw it, for
	// acknowledgers that need the payload (tests, dead-letter routing). Only
	// valid during the Ack call.
	Message any
}

// Func adapts a function to the Acknowledger interface. Func values are not
// comparable, so use a pointer to one: acker.Acknowledger(&f).
type Func func(ctx context.Context, successful, failed []Outcome)

// Ack calls f.
func (f *Func) Ack(ctx context.Context, successful, failed []Outcome) { (*f)(ctx, successful, failed) }

type discard struct{}

func (discard) Ack(context.Context, []Outcome, []Outcome) {}

// Discard is an Acknowledger that ignores every outcome. Messages created
// without an acknowledger are acknowledged to it.
var Discard Acknowledger = discard{}

// Group collects the outcomes of one chunk or batch and delivers them with
// one Ack call per acknowledger (per outcome for an acknowledger whose value
// cannot be compared, see Acknowledger). The zero value is ready to use. A
// Group is reused from chunk to chunk by one goroutine, so its buffers are
// kept and steady-state grouping does not allocate. It is not safe for
// concurrent use.
type Group struct {
	groups []group
	used   int
	last   int
	// known is the last acknowledger found comparable (see comparable),
	// so that the acknowledger of every chunk is checked once, not once
	// per chunk.
	known Acknowledger
}

type group struct {
	ack Acknowledger
	// key is ack when it can be compared, nil otherwise: find matches an
	// acknowledger against it, so that comparing never meets an
	// uncomparable value on both sides (which panics) and an uncomparable
	// acknowledger gets a group of its own for each outcome.
	key       Acknowledger
	succeeded []Outcome
	failed    []Outcome
}

// reset empties gr, keeping its slices' memory.
func (gr *group) reset() {
	clear(gr.succeeded)
	clear(gr.failed)
	gr.succeeded = gr.succeeded[:0]
	gr.failed = gr.failed[:0]
	gr.ack, gr.key = nil, nil
}

// Add records o for a. o goes to the failed list when o.Err is not nil. A nil
// acknowledger means Discard.
func (g *Group) Add(a Acknowledger, o Outcome) {
	*g.Slot(a, o.Err != nil) = o
}

// Slot records a zero outcome for a, in the failed list when failed is
// true, and returns it for the caller to fill in where it lies, which
// spares copying an Outcome per message. The pointer is valid until the
// next call on g; a failed outcome must be given its Err. A nil
// acknowledger means Discard.
func (g *Group) Slot(a Acknowledger, failed bool) *Outcome {
	if a == nil {
		a = Discard
	}
	gr := g.find(a)
	list := &gr.succeeded
	if failed {
		list = &gr.failed
	}
	*list = append(*list, Outcome{})
	return &(*list)[len(*list)-1]
}

// Len reports how many outcomes are waiting to be flushed.
func (g *Group) Len() int {
	n := 0
	for i := range g.used {
		n += len(g.groups[i].succeeded) + len(g.groups[i].failed)
	}
	return n
}

func (g *Group) find(a Acknowledger) *group {
	if g.last < g.used && g.groups[g.last].key == a {
		return &g.groups[g.last]
	}
	for i := range g.used {
		if g.groups[i].key == a {
			g.last = i
			return &g.groups[i]
		}
	}
	if g.used == len(g.groups) {
		g.groups = append(g.groups, group{})
	}
	g.last = g.used
	gr := &g.groups[g.used]
	gr.ack = a
	if g.comparable(a) {
		gr.key = a
	}
	g.used++
	return gr
}

// comparable reports whether a can be compared with ==, remembering the
// last acknowledger that can. Comparing with known never panics: a value
// that equals itself holds no uncomparable value anywhere, so comparing
// it with any other value never meets one on both sides.
func (g *Group) comparable(a Acknowledger) bool {
	if a == g.known {
		return true
	}
	if !selfEqual(a, a) {
		return false
	}
	g.known = a
	return true
}

// selfEqual reports whether a == b, false when comparing them panics
// (their dynamic type, or a value they hold, cannot be compared). Called
// with the same value twice, it tells whether that value is comparable;
// a value unequal to itself (a NaN) is not one find could match either.
func selfEqual(a, b Acknowledger) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// Flush calls every acknowledger that has outcomes once, in the order they
// were first added, then resets the group. A panicking acknowledger is
// recovered and logged to log (which may be nil); the others are still
// called.
func (g *Group) Flush(ctx context.Context, log *slog.Logger) {
	for i := range g.used {
		gr := &g.groups[i]
		if len(gr.succeeded) > 0 || len(gr.failed) > 0 {
			Safe(ctx, log, gr.ack, gr.succeeded, gr.failed)
		}
		gr.reset()
	}
	g.used = 0
	g.last = 0
}

// Reset discards the outcomes waiting to be flushed without reporting them
// (a stage whose goroutine is ending uses it, so that none is reported
// twice), keeping the group's memory for reuse.
func (g *Group) Reset() {
	for i := range g.groups {
		g.groups[i].reset()
	}
	g.used = 0
	g.last = 0
}

// Safe invokes a.Ack and recovers a panic in it, logging it to log (which may
// be nil) in one error line with the panic's value and stack. It reports
// whether Ack returned normally.
func Safe(ctx context.Context, log *slog.Logger, a Acknowledger, successful, failed []Outcome) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
			if log != nil {
				log.ErrorContext(ctx, "acknowledger panicked; its outcomes are lost",
					slog.String("acknowledger", fmt.Sprintf("%T", a)),
					slog.Int("successful", len(successful)),
					slog.Int("failed", len(failed)),
					slog.Any("panic", r),
					slog.String("stack", string(debug.Stack())))
			}
		}
	}()
	a.Ack(ctx, successful, failed)
	return true
}
