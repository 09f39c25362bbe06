package producer

import (
	"context"
	"errors"
	"fmt"
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

// RestartError is returned when a producer stage's source failed more than
// Restart.MaxRestarts times within Restart.Window. The pipeline stops.
type RestartError struct {
	// Stage is the name of the producer stage that gave up.
	Stage string
	// Restarts is how many restarts happened within Window.
	Restarts int
	// Window is Restart.Window.
	Window time.Duration
	// Last is the error of the last failed Run.
	Last error
}

// Error says which stage gave up, how often it restarted and why it failed.
func (e *RestartError) Error() string {
	return fmt.Sprintf("producer stage %s: %v (%d restarts within %s); last error: %v",
		e.Stage, ErrTooManyRestarts, e.Restarts, e.Window, e.Last)
}

// Unwrap returns ErrTooManyRestarts and the last source error.
func (e *RestartError) Unwrap() []error { return []error{ErrTooManyRestarts, e.Last} }

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
