package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/message"
)

// Source is anything that supplies messages to a pipeline: a Kafka consumer
// group, Pulsar consumers, an internal topic, a generator, a test. Its three
// methods are the whole contract between a source and the pipeline, so a
// wrapper that embeds the Source it wraps passes all of it on, and one that
// does not must say what each method does. A source with nothing to
// describe or release embeds Basic.
//
// Run is called once per producer stage, concurrently when Concurrency > 1,
// each time with its own *Stage. Within Run the source creates one Feed per
// flow-controlled consumer (a Pulsar consumer, a Kafka partition, …) with
// Stage.NewFeed, fetches only as many messages per feed as the feed has been
// granted permits, and hands them over with Feed.Deliver.
//
// Run must return when ctx is cancelled: that is how the pipeline stops a
// source from fetching. The acknowledgers of the messages it delivered must
// keep working after Run returns, until Close, because a draining pipeline
// still acknowledges them.
//
// Run's result decides what happens next:
//   - ctx cancelled: the stage is stopping, the result is ignored;
//   - nil: the source is exhausted; the stage finishes once its buffered
//     messages are dispatched, and when every stage has finished the pipeline
//     drains and stops by itself;
//   - an error (or a panic, recovered as a *message.PanicError, or an end
//     of its goroutine with runtime.Goexit, as t.FailNow does, an
//     *ExitError: Run has a goroutine of its own per call): the stage
//     closes the run's feeds and restarts the source after a backoff, as
//     Options.Restart says. The failure is logged with the stack of the
//     panic or exit.
//
// The restart rules are checked when a run ends, and they tell a run that
// connected from one that did not by whether it created a feed. So a source
// should create its feeds as soon as it is connected, and bound every
// connection attempt (a connect or operation timeout): a Run that waits
// forever on a broker that never answers is neither restarted nor given up.
//
// Info describes the source to the pipeline, which calls it when it is
// created (pipeline.New), before any Run: an error means the source's own
// options are invalid and is reported beside the pipeline's option errors,
// and so is a panic in Info (an error wrapping *message.PanicError).
// Info must read only what New fixed (the options), never state a running
// source changes.
//
// Close releases what the source holds (connections, consumer groups). The
// pipeline calls it once, after every Run call and every stage goroutine has
// returned, so no Ack call is running or will follow. A panic or an exit
// (runtime.Goexit) in Close is a failed Close, as an error is. After a complete
// drain every delivered message has had its outcome; after a drain cut
// short by the shutdown timeout, the messages still in flight never get one
// (the broker redelivers them).
type Source[T any] interface {
	Run(ctx context.Context, stage *Stage[T]) error
	Info() (Info, error)
	Close(ctx context.Context) error
}

// Info is what a source tells the pipeline about itself. The zero Info is
// an unordered source with the default window.
type Info struct {
	// Ordered asks for the messages to be handled in order per partition
	// key (message.Message.SetPartitionKey), as the Kafka source does, which
	// gives every message of a partition the same key, and the Pulsar
	// source on its KeyShared, Exclusive and Failover subscriptions. When it is true and
	// the processors have no PartitionBy of their own, the pipeline routes
	// messages by that key: each key is handled by one processor, in the
	// order the source delivered it.
	Ordered bool
	// Window is the permit window per feed the source needs when the user
	// leaves Options.Flow.Initial at 0 (the other Flow fields then follow
	// from it as usual); 0 keeps DefaultFlowInitial. It is for brokers that
	// hand out messages in batches much larger than the default window
	// suits: a Kafka fetch returns up to a megabyte per partition, and a
	// window of 100 would stall its fetch loop. A window the user sets
	// always wins.
	Window int
}

// Basic is the part of the Source contract a source with nothing to
// describe or release shares: embedded in a source type, it gives it an
// Info that is the zero Info with valid options, and a Close that does
// nothing. The source defines Run, and whichever of the two it needs.
type Basic struct{}

// Info returns the zero Info and no error.
func (Basic) Info() (Info, error) { return Info{}, nil }

// Close does nothing and returns nil.
func (Basic) Close(context.Context) error { return nil }

// SourceFunc adapts a function to the Source interface.
type SourceFunc[T any] func(ctx context.Context, stage *Stage[T]) error

// Run calls f.
func (f SourceFunc[T]) Run(ctx context.Context, stage *Stage[T]) error { return f(ctx, stage) }

// Info returns the zero Info and no error.
func (f SourceFunc[T]) Info() (Info, error) { return Info{}, nil }

// Close does nothing and returns nil.
func (f SourceFunc[T]) Close(context.Context) error { return nil }

// ExitError is the error of a call of a Source method, Run or Close, that
// ended its goroutine with runtime.Goexit (t.FailNow does, in a test's fake
// source) before returning. The stage calls Run, and the pipeline Close,
// each on a goroutine of its own, so the exit ends only that one: a Run that exits is a failed
// run, restarted as Options.Restart says, and a Close that exits is a
// failed Close. It wraps message.ErrHandlerExited.
type ExitError struct {
	// Method is the Source method that exited: "Run" or "Close".
	Method string
	// Stack is the stack of the goroutine at the exit: it shows the call
	// that ended it.
	Stack []byte
}

// Error names the method that exited.
func (e *ExitError) Error() string {
	return fmt.Sprintf("producer: the source's %s ended its goroutine (runtime.Goexit) before returning", e.Method)
}

// Unwrap returns message.ErrHandlerExited.
func (e *ExitError) Unwrap() error { return message.ErrHandlerExited }

// call calls f, a Source method named method, on a goroutine of its own
// and returns its error: a panic is recovered as a *message.PanicError and
// an exit (runtime.Goexit) is an *ExitError with the stack of the exit.
// It costs a goroutine per call, and is used once per Run or Close call.
func call(method string, f func() error) error {
	return panics.Isolate(func() (err error) {
		defer message.Recover(&err)
		return f()
	}, func(stack []byte) error { return &ExitError{Method: method, Stack: stack} })
}

// FailureStack is the stack a failed Source call's error carries: that of
// a panic (*message.PanicError) or of an exit (*ExitError); nil for any
// other error. The stage and the pipeline log it with the failure.
func FailureStack(err error) []byte {
	var pe *message.PanicError
	if errors.As(err, &pe) {
		return pe.Stack
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Stack
	}
	return nil
}

// withStack returns attrs, followed by a "stack" attribute when err
// carries the stack of a panic or an exit (see FailureStack).
func withStack(err error, attrs ...any) []any {
	if st := FailureStack(err); st != nil {
		attrs = append(attrs, slog.String("stack", string(st)))
	}
	return attrs
}

// ErrTooManyRestarts is wrapped by *RestartError.
var ErrTooManyRestarts = errors.New("producer: source restarted too often")

// RestartRule names the Restart rule that made a stage give up: the name of
// the option to raise to tolerate more.
type RestartRule string

// The rules of Restart.
const (
	// RuleMaxRestarts: more than Restart.MaxRestarts failures within
	// Restart.Window.
	RuleMaxRestarts RestartRule = "maxRestarts"
	// RuleMaxConsecutiveFailures: Restart.MaxConsecutiveFailures runs in a
	// row failed without delivering a message.
	RuleMaxConsecutiveFailures RestartRule = "maxConsecutiveFailures"
	// RuleMaxFailingTime: Restart.MaxFailingTime spent failing without
	// delivering a message.
	RuleMaxFailingTime RestartRule = "maxFailingTime"
)

// RestartError is returned when a producer stage gives up on its source
// under one of the rules of Restart. The pipeline stops.
type RestartError struct {
	// Stage is the name of the producer stage that gave up.
	Stage string
	// Rule is the rule that tripped.
	Rule RestartRule
	// Restarts is how many restarts happened within Window.
	Restarts int
	// Window is Restart.Window.
	Window time.Duration
	// ConsecutiveFailures is how many runs in a row failed without
	// delivering a message, the last one included.
	ConsecutiveFailures int
	// Failing is the time spent failing since the last delivered message:
	// failed runs before they connected, and the backoffs between them.
	Failing time.Duration
	// Last is the error of the last failed Run.
	Last error
}

// Error says which stage gave up, under which rule, and why its source
// failed last. It is one line: line breaks in the source's error are
// replaced by "; ".
func (e *RestartError) Error() string {
	var why string
	switch e.Rule {
	case RuleMaxConsecutiveFailures:
		why = fmt.Sprintf("%d runs in a row failed without delivering a message", e.ConsecutiveFailures)
	case RuleMaxFailingTime:
		why = fmt.Sprintf("failing for %s without delivering a message", e.Failing)
	default:
		why = fmt.Sprintf("%d restarts within %s", e.Restarts, e.Window)
	}
	last := "<nil>"
	if e.Last != nil {
		last = oneLine(e.Last.Error())
	}
	return fmt.Sprintf("%v: stage %q (%s; restart.%s); last error: %s",
		ErrTooManyRestarts, e.Stage, why, e.Rule, last)
}

// Unwrap returns ErrTooManyRestarts and the last source error.
func (e *RestartError) Unwrap() []error { return []error{ErrTooManyRestarts, e.Last} }

// oneLine replaces the line breaks of s (errors.Join puts them between the
// errors it joins) by "; ".
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	return strings.Join(lines, "; ")
}
