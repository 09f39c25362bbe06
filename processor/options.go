// Package processor is the middle stage of a pipeline: a pool of processors
// that take messages in chunks from the producer stages, call the user's
// handler on each, turn errors and panics into failed messages, and route
// every message either to a batcher or, when the pipeline has none, straight
// back to its acknowledger.
package processor

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/boulevard-go/boulevard/validate"

	"github.com/boulevard-go/boulevard/message"
)

// DefaultMaxDemand is the default chunk size a processor takes at once.
const DefaultMaxDemand = 10

// Upper bounds of the options, checked when the pipeline is built. Each
// processor holds a chunk buffer of MaxDemand entries and the processors'
// queues hold about 2·Concurrency·MaxDemand (or QueueCapacity each, when
// set), so their products are bounded too: the processors' own memory
// stays below a few tens of MiB whatever the options say.
const (
	// ConcurrencyLimit is the largest Concurrency.
	ConcurrencyLimit = 10_000
	// MaxDemandLimit is the largest MaxDemand.
	MaxDemandLimit = 10_000
	// ChunkSlotsLimit is the largest Concurrency × MaxDemand.
	ChunkSlotsLimit = 1 << 20
	// QueueCapacityLimit is the largest QueueCapacity, and with
	// PartitionBy the largest Concurrency × QueueCapacity (the processors'
	// queues together).
	QueueCapacityLimit = 1 << 20
)

// Handler handles one message and returns the payload it becomes. Returning
// an error fails the message (as does calling m.Fail and returning nil). The
// handler may route the message with m.SetBatcher, m.SetBatchKey and
// m.SetBatchMode. ctx is cancelled when the pipeline cuts a drain short
// (its shutdown timeout passed, or Stop's context is ending); an error that
// is or wraps context.Canceled or context.DeadlineExceeded returned then is
// a failure the shutdown caused: the message is interrupted (its error wraps
// acker.ErrShutdown, its disposition is acker.DispositionRetry whatever
// HandleFailed sets), so that its source delivers it again. A handler's own
// deadline passing while the pipeline runs is an ordinary failure. Once ctx
// is cancelled the processor hands no further message to the handler.
// A handler (or Prepare, or HandleFailed) that ends its goroutine with
// runtime.Goexit, as t.FailNow does, fails every message of its chunk
// with message.ErrHandlerExited (one that failed before keeps its error),
// reported once, and another goroutine takes over as that processor.
// As after a panic, HandleFailed sees those messages before they are
// acknowledged, unless it is what exited.
type Handler[In, Out any] func(ctx context.Context, m *message.Message[In]) (Out, error)

// Options configure the processors of a pipeline.
type Options[In, Out any] struct {
	// Concurrency is the number of processors, at most ConcurrencyLimit.
	// Default runtime.GOMAXPROCS(0), read by WithDefaults (the one default
	// that depends on the machine, so it is not a constant), or
	// ConcurrencyLimit when GOMAXPROCS is above it.
	Concurrency int `validate:"gte=1,lte=10000"`
	// MaxDemand is the largest chunk of messages a processor takes at once;
	// Prepare sees one chunk, and the acknowledgements of a chunk are sent
	// together. A processor pays a fixed cost per chunk (taking it from its
	// queue, handing it on), so when handlers are cheap larger chunks move
	// more messages per second (docs/operations.md, "Tuning for
	// throughput", measures what larger chunks buy and cost); smaller
	// ones spread messages more evenly over the processors.
	// At most MaxDemandLimit, and Concurrency × MaxDemand at most
	// ChunkSlotsLimit. Default 10.
	MaxDemand int `validate:"gte=1,lte=10000"`
	// MinDemand makes a processor take chunks of at most MaxDemand −
	// MinDemand messages, as a GenStage consumer asks for more events once
	// it is down to min_demand of its max_demand: MaxDemand then still
	// sizes the processors' queues (how much is read ahead) unless
	// QueueCapacity sets them, while the
	// chunks that Prepare sees and whose acknowledgements travel together
	// are smaller. At least 0 and less than MaxDemand. Default 0 (chunks
	// of up to MaxDemand).
	MinDemand int `validate:"omitempty,gte=0,ltfield=MaxDemand"`
	// QueueCapacity, when set, is the capacity of the processors' queue,
	// in messages (with PartitionBy, of each processor's own queue): how
	// many messages wait for a processor at most. Default 0: the pipeline
	// derives it, max(2·Concurrency·MaxDemand, 64, the producer's permit
	// window) without PartitionBy and max(2·MaxDemand, 64, the window)
	// each with it (docs/architecture.md, "How messages move between
	// stages"). Set it when messages are large and memory, not
	// throughput, is what limits the pipeline: the pipeline then holds
	// fewer of them (docs/operations.md, "Sizing memory for large
	// records"). A queue smaller than the window, or than MaxDemand,
	// works: the producer hands a delivery over in parts as room frees
	// up, and a processor takes what is queued. It costs throughput: a
	// small queue wakes the producer and the processors more often for
	// the same messages, and a delivery that does not fit waits in the
	// producer stage's buffer instead. Between 1 and QueueCapacityLimit,
	// and with PartitionBy Concurrency × QueueCapacity at most
	// QueueCapacityLimit. PartitionBy here includes the one a pipeline
	// sets for an ordered source (the Kafka source, the Pulsar source on
	// an ordered subscription type; see pipeline.Options.WithDefaults):
	// its processors each have a queue of QueueCapacity, Concurrency ×
	// QueueCapacity messages together.
	QueueCapacity int `validate:"omitempty,gte=1,lte=1048576"`
	// PartitionBy, when set, makes messages with the same key go to the same
	// processor, which handles them in the order they arrived. Nil (the
	// default) balances messages over all processors. It is not called
	// when Concurrency is 1 (there is one processor). A panic in it fails
	// that message with a *message.PanicError.
	PartitionBy func(m *message.Message[In]) string
	// Prepare, when set, is called with each chunk before the handler sees
	// its messages (Broadway's prepare_messages), for work that is cheaper
	// in bulk, such as one database query for the whole chunk. An error it
	// returns because the pipeline cut a drain short interrupts the chunk,
	// as for Handler. It may change
	// the messages and fail some of them. An error or a panic fails every
	// message of the chunk. The slice is a copy of the chunk: what Prepare
	// does to the slice itself (filtering it in place with
	// slices.DeleteFunc, reordering or replacing elements) changes nothing
	// of which messages the handler sees, in which order; to keep a message
	// from the handler, fail it. The slice is reused for the next chunk: do
	// not keep it after Prepare returns (nor the messages past their
	// outcome: a source may reuse them, see message.Message).
	Prepare func(ctx context.Context, msgs []*message.Message[In]) error
	// Handle is called for every message. Required.
	Handle Handler[In, Out] `validate:"required"`
	// HandleFailed, when set, is called with the messages of a chunk that
	// failed in this stage, before they are acknowledged (Broadway's
	// handle_failed). It may change how they are acknowledged with
	// m.SetDisposition, or replace their error with m.Fail. A panic in it is
	// logged and the messages are acknowledged with whatever it changed
	// before it panicked. It sees the messages of a chunk whose handler or
	// Prepare panicked or ended its goroutine (runtime.Goexit; see
	// Handler), but is not called again after it ended its own. It sees
	// interrupted messages (see Handler) too, but cannot make them
	// anything but a retry. The slice is a copy:
	// changing the slice itself (rather than its messages) changes nothing
	// of which messages are acknowledged. It is reused: do not keep it
	// after the call.
	HandleFailed func(ctx context.Context, failed []*message.Message[In])
}

// WithDefaults returns o with every zero field replaced by its default:
// Concurrency runtime.GOMAXPROCS(0) (at most ConcurrencyLimit), MaxDemand
// DefaultMaxDemand (MinDemand stays 0).
func (o Options[In, Out]) WithDefaults() Options[In, Out] {
	if o.Concurrency == 0 {
		o.Concurrency = min(runtime.GOMAXPROCS(0), ConcurrencyLimit)
	}
	if o.MaxDemand == 0 {
		o.MaxDemand = DefaultMaxDemand
	}
	return o
}

// Validate reports every broken rule of o, which carries its defaults (see
// WithDefaults): the struct tags, Concurrency × MaxDemand at most
// ChunkSlotsLimit and, with PartitionBy, Concurrency × QueueCapacity at
// most QueueCapacityLimit. It returns nil or a validate.Errors value.
func (o Options[In, Out]) Validate() error { return o.ValidateAs("") }

// ValidateAs is Validate with every field path rooted at path
// ("processors" in a pipeline). pipeline.New calls it.
func (o Options[In, Out]) ValidateAs(path string) error {
	return validate.Join(validate.Struct(path, &o), o.checkBounds(path))
}

// checkBounds reports the rules between fields that struct tags cannot
// express: Concurrency × MaxDemand at most ChunkSlotsLimit and, with
// PartitionBy, Concurrency × QueueCapacity at most QueueCapacityLimit.
func (o Options[In, Out]) checkBounds(path string) error {
	errs := []error{o.checkProduct(path, "maxDemand", "chunkSlots", "", o.MaxDemand, MaxDemandLimit, ChunkSlotsLimit)}
	if o.PartitionBy != nil {
		errs = append(errs, o.checkProduct(path, "queueCapacity", "queueSlots", "partitioned processors (a partitionBy, or an ordered source's partition keys) and ", o.QueueCapacity, QueueCapacityLimit, QueueCapacityLimit))
	}
	return validate.Join(errs...)
}

// checkProduct reports Concurrency × v above limit as an error on field
// (whose value v is and whose own bound is vmax) with rule, naming what
// the bound applies with. It returns nil when a field is unset or out of
// its own bounds, which the tags report.
func (o Options[In, Out]) checkProduct(path, field, rule, with string, v, vmax, limit int) error {
	if o.Concurrency < 1 || o.Concurrency > ConcurrencyLimit || v < 1 || v > vmax || o.Concurrency*v <= limit {
		return nil
	}
	return validate.Field(join(path, field), rule, fmt.Sprintf(
		"must be ≤ %d with %s%s (concurrency × %s must be ≤ %d)",
		limit/o.Concurrency, with, join(path, fmt.Sprintf("concurrency %d", o.Concurrency)), field, limit))
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// ErrUnknownBatcher is wrapped by *UnknownBatcherError.
var ErrUnknownBatcher = errors.New("processor: unknown batcher")

// UnknownBatcherError fails a message that a processor routed to a batcher
// the pipeline does not have.
type UnknownBatcherError struct {
	// Batcher is the name the message was routed to.
	Batcher string
	// Known lists the pipeline's batchers.
	Known []string
}

// Error names the batcher and the ones that exist.
func (e *UnknownBatcherError) Error() string {
	return fmt.Sprintf("%v %q (the pipeline has %q)", ErrUnknownBatcher, e.Batcher, e.Known)
}

// Unwrap returns ErrUnknownBatcher.
func (e *UnknownBatcherError) Unwrap() error { return ErrUnknownBatcher }
