package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Outcome is what becomes of a message a topology consumer delivered.
type Outcome uint8

const (
	// OutcomeAck means the message is done with.
	OutcomeAck Outcome = iota
	// OutcomeRetry reports a transient failure. The message goes to a hold
	// queue and is delivered again when its hold has passed; its retry count
	// grows by one. Past MaxRetries it is rejected instead (reason
	// max_retries).
	OutcomeRetry
	// OutcomeReject reports a permanent failure. The message goes to the
	// DLQ, or is discarded with a warning when the topology has none.
	OutcomeReject
	// OutcomeDefer sends the message back through the hold queue its retry
	// count selects, without counting a retry.
	OutcomeDefer
	// OutcomeRequeue means the message was not handled (the pipeline's
	// shutdown interrupted it); it is delivered again at once, without
	// counting a retry.
	OutcomeRequeue
)

var outcomeNames = [...]string{"ack", "retry", "reject", "defer", "requeue"}

// String returns "ack", "retry", "reject", "defer" or "requeue".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Reason is why a message was dead-lettered.
type Reason string

// The reasons of Death.Reason.
const (
	// ReasonRejected: the handler rejected it.
	ReasonRejected Reason = "rejected"
	// ReasonMaxRetries: it was retried MaxRetries times and failed again.
	ReasonMaxRetries Reason = "max_retries"
	// ReasonPoisoned: a sequenced FailAll topology dead-lettered it because
	// a message of its key was dead-lettered (that message itself carries
	// this reason too).
	ReasonPoisoned Reason = "poisoned"
	// ReasonTimeout: its handler exceeded the handler timeout on its last
	// allowed attempt.
	ReasonTimeout Reason = "timeout"
)

// ErrHandlerTimeout is wrapped by the error of a message whose handler ran
// longer than the timeout given to [WithTimeout]. Such a failure counts as a
// Retry.
var ErrHandlerTimeout = errors.New("topology: handler timed out")

// ErrDeferred is the error of a message failed with [Defer].
var ErrDeferred = errors.New("topology: deferred")

// OutcomeError asks a topology consumer for a given outcome. Handlers return
// one made by Retry, Reject or Defer (or fail the message with it, or
// replace a message's error with it from a failure hook); the consumer
// finds it with errors.As anywhere in the error's chain.
type OutcomeError struct {
	// Outcome is OutcomeRetry, OutcomeReject or OutcomeDefer; any other
	// value (OutcomeAck, the zero value, included) asks for a retry.
	Outcome Outcome
	// Err is the failure (ErrDeferred for Defer); nil reads as
	// message.ErrFailed.
	Err error
}

// Error returns the failure's text: the outcome it asks for is not part of
// the message, so a dead letter's death metadata reads as the handler's
// own error.
func (e *OutcomeError) Error() string { return e.failure().Error() }

// Unwrap returns the failure.
func (e *OutcomeError) Unwrap() error { return e.failure() }

// failure is e.Err, or message.ErrFailed when there is none (a nil e
// included: a handler may return a nil *OutcomeError as its error).
func (e *OutcomeError) failure() error {
	if e == nil || e.Err == nil {
		return message.ErrFailed
	}
	return e.Err
}

func outcomeError(o Outcome, err error) error {
	if err == nil {
		err = message.ErrFailed
	}
	return &OutcomeError{Outcome: o, Err: err}
}

// Retry fails a message as transient: it is retried through the hold
// queues. A nil err means message.ErrFailed.
func Retry(err error) error { return outcomeError(OutcomeRetry, err) }

// Reject fails a message as permanent: it is dead-lettered at once. A nil
// err means message.ErrFailed.
func Reject(err error) error { return outcomeError(OutcomeReject, err) }

// Defer sends a message back through the hold queue without counting a
// retry.
func Defer() error { return &OutcomeError{Outcome: OutcomeDefer, Err: ErrDeferred} }

// Decide returns what a topology consumer does with a message whose outcome
// is o, and whether its failure was a handler timeout:
//
//   - success: OutcomeAck;
//   - interrupted by the pipeline's shutdown (acker.Interrupted): OutcomeRequeue,
//     whatever else the error says, since the message was not handled;
//   - an error wrapping an *OutcomeError: its Outcome when that is
//     OutcomeRetry, OutcomeReject or OutcomeDefer, OutcomeRetry otherwise
//     (a nil *OutcomeError too: a failed message is never acked, nor
//     delivered again uncounted, because an OutcomeError says so);
//   - an error wrapping ErrHandlerTimeout: OutcomeRetry;
//   - any other error: by disposition, so a failure hook keeps the meaning
//     it has for every source: DispositionDiscard (done with, although it
//     failed) is OutcomeReject, DispositionDefault and DispositionRetry are
//     OutcomeRetry.
func Decide(o acker.Outcome) (out Outcome, timeout bool) {
	if o.Err == nil {
		return OutcomeAck, false
	}
	if acker.Interrupted(o) {
		return OutcomeRequeue, false
	}
	if oe, ok := errors.AsType[*OutcomeError](o.Err); ok {
		timeout := errors.Is(o.Err, ErrHandlerTimeout)
		if oe != nil { // a nil *OutcomeError asks for nothing
			switch oe.Outcome {
			case OutcomeRetry, OutcomeReject, OutcomeDefer:
				return oe.Outcome, timeout
			}
		}
		return OutcomeRetry, timeout
	}
	if errors.Is(o.Err, ErrHandlerTimeout) {
		return OutcomeRetry, true
	}
	if o.Disposition == acker.DispositionDiscard {
		return OutcomeReject, false
	}
	return OutcomeRetry, false
}

// TimeoutError is the error of a message whose handler ran longer than its
// timeout. It wraps ErrHandlerTimeout and what the handler returned (if
// anything).
type TimeoutError struct {
	// Timeout is the limit the handler exceeded.
	Timeout time.Duration
	// Err is the handler's own error, or nil if it returned success late.
	Err error
}

// Error names the limit and the handler's error.
func (e *TimeoutError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%v after %s", ErrHandlerTimeout, e.Timeout)
	}
	return fmt.Sprintf("%v after %s: %v", ErrHandlerTimeout, e.Timeout, e.Err)
}

// Unwrap returns ErrHandlerTimeout and the handler's error.
func (e *TimeoutError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrHandlerTimeout}
	}
	return []error{ErrHandlerTimeout, e.Err}
}

// WithTimeout wraps a processor handler so that it runs with a deadline d
// later: a handler that is still running then (its context says
// DeadlineExceeded) or that returns after it fails its message with a
// *TimeoutError, which a topology consumer treats as a Retry (and, past
// MaxRetries, dead-letters with reason timeout). The handler must honour
// its context: the wrapper starts no goroutine and cannot stop one that
// does not. A cancellation of the pipeline's own context keeps its meaning
// (the message is interrupted, not timed out). d ≤ 0 returns h unchanged.
func WithTimeout[In, Out any](d time.Duration, h func(context.Context, *message.Message[In]) (Out, error)) func(context.Context, *message.Message[In]) (Out, error) {
	if d <= 0 {
		return h
	}
	return func(ctx context.Context, m *message.Message[In]) (Out, error) {
		hctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		out, err := h(hctx, m)
		if ctx.Err() == nil && hctx.Err() != nil {
			var zero Out
			return zero, &TimeoutError{Timeout: d, Err: err}
		}
		return out, err
	}
}
