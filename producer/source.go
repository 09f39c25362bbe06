package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Source is anything that supplies messages to a pipeline: a Kafka consumer
// group, Pulsar consumers, an internal topic, a generator, a test.
//
// Run is called once per producer stage, concurrently when Concurrency > 1,
// each time with its own *Stage. Within Run the source creates one Feed per
// flow-controlled consumer (a Pulsar consumer, a Kafka partition, …) with
// Stage.NewFeed, fetches only as many messages per feed as the feed has been
// granted permits, and hands them over with Feed.Deliver.
//
// Run must return when ctx is cancelled: that is how the pipeline stops a
// source from fetching. The acknowledgers of the messages it delivered must
// keep working after Run returns, until Close (if the source implements
// Closer), because a draining pipeline still acknowledges them.
//
// Run's result decides what happens next:
//   - ctx cancelled: the stage is stopping, the result is ignored;
//   - nil: the source is exhausted; the stage finishes once its buffered
//     messages are dispatched, and when every stage has finished the pipeline
//     drains and stops by itself;
//   - an error (or a panic, recovered): the stage restarts the source after a
//     backoff, as Options.Restart says.
//
// The restart rules are checked when a run ends, and they tell a run that
// connected from one that did not by whether it created a feed. So a source
// should create its feeds as soon as it is connected, and bound every
// connection attempt (a connect or operation timeout): a Run that waits
// forever on a broker that never answers is neither restarted nor given up.
type Source[T any] interface {
	Run(ctx context.Context, stage *Stage[T]) error
}

// Closer is implemented by sources that hold resources (connections,
// consumer groups) to release when the pipeline stops. Close is called once,
// after every Run call and every stage goroutine has returned, so no Ack call
// is running or will follow. After a complete drain every delivered message
// has had its outcome; after a drain cut short by the shutdown timeout, the
// messages still in flight never get one (the broker redelivers them).
type Closer interface {
	Close(ctx context.Context) error
}

// SourceFunc adapts a function to the Source interface.
type SourceFunc[T any] func(ctx context.Context, stage *Stage[T]) error

// Run calls f.
func (f SourceFunc[T]) Run(ctx context.Context, stage *Stage[T]) error { return f(ctx, stage) }

// ErrTooManyRestarts is wrapped by *RestartError.
var ErrTooManyRestarts = errors.New("source restarted too often")

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
	return fmt.Sprintf("producer stage %q: %v (%s; restart.%s); last error: %s",
		e.Stage, ErrTooManyRestarts, why, e.Rule, last)
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

// Ordered is implemented by sources whose messages must be handled in order
// per partition key (message.Message.SetPartitionKey), such as the Kafka
// source, which gives every message of a partition the same key. When Ordered
// reports true and the processors have no PartitionBy of their own, the
// pipeline routes messages by that key: each key is handled by one processor,
// in the order the source delivered it.
type Ordered interface {
	Ordered() bool
}

// Validator is implemented by sources whose options can be checked before
// anything starts. The pipeline calls Validate when it is created, and
// reports the error beside its own option errors.
type Validator interface {
	Validate() error
}

// WindowAdvisor is implemented by sources whose brokers hand out messages in
// batches much larger than the default window of 100 suits: a Kafka fetch
// returns up to a megabyte per partition, and a window of 100 would stall
// the fetch loop. When Options.Flow.Initial is 0 the producer takes it from
// DefaultWindow (the other Flow fields then follow from it as usual); a
// result of 0 keeps the default. A window the user sets always wins.
type WindowAdvisor interface {
	DefaultWindow() int
}
