// Package batcher is the last stage of a pipeline: named batchers group the
// messages processors route to them by batch key, emit a batch when it
// reaches BatchSize (or, with Weight, before it would pass MaxWeight), when
// BatchTimeout has passed since its first message, or
// at once for a message in flush mode (and for everything when the pipeline
// drains, or while a source releases a feed and waits for its messages in
// flight, such as a revoked Kafka partition), and batch processors call the user's batch handler and
// acknowledge the outcome of every message to its source.
package batcher

import (
	"context"
	"fmt"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/validate"
)

// Defaults for zero Options fields.
const (
	DefaultBatchSize    = 100
	DefaultBatchTimeout = time.Second
	DefaultConcurrency  = 1
	DefaultMaxDemand    = 64
)

// Upper bounds of the options, checked when the pipeline is built.
const (
	// BatchSizeLimit is the largest BatchSize.
	BatchSizeLimit = 1_000_000
	// BatchTimeoutLimit is the largest BatchTimeout.
	BatchTimeoutLimit = 24 * time.Hour
	// ConcurrencyLimit is the largest Concurrency.
	ConcurrencyLimit = 10_000
	// MaxDemandLimit is the largest MaxDemand.
	MaxDemandLimit = 10_000
	// MaxWeightLimit is the largest MaxWeight: 2⁴⁰, a TiB when weights
	// are bytes.
	MaxWeightLimit = 1 << 40
	// QueueCapacityLimit is the largest QueueCapacity, and with
	// PartitionBy the largest Concurrency × QueueCapacity (the partitions'
	// input queues together).
	QueueCapacityLimit = 1 << 20
	// BatchQueueCapacityLimit is the largest BatchQueueCapacity, and with
	// PartitionBy the largest Concurrency × BatchQueueCapacity (the
	// partitions' batch queues together).
	BatchQueueCapacityLimit = 1 << 16
)

// Handler handles one batch. All messages share info.BatchKey. It may fail
// single messages with m.Fail; returning an error fails every message of the
// batch that has not failed yet, and a panic fails the whole batch (replacing
// errors set with m.Fail, since the handler's work on the batch is in doubt).
// ctx is cancelled when the pipeline cuts a drain short; a failure it
// causes (an error that is or wraps context.Canceled or
// context.DeadlineExceeded, returned or given to m.Fail once ctx is
// cancelled) interrupts the message: its error wraps acker.ErrShutdown and
// its disposition is acker.DispositionRetry whatever HandleFailed sets, so
// that its source delivers it again. A batch not yet handed to the handler
// when ctx is cancelled stays unacknowledged. A handler (or HandleFailed)
// that ends its goroutine with runtime.Goexit, as t.FailNow does, fails the
// batch with message.ErrHandlerExited (when HandleFailed exited, the
// messages keep the outcome they had), reported once, and another
// goroutine takes over as that batch processor. As after a panic,
// HandleFailed sees the batch before it is acknowledged, unless it is
// what exited.
//
// The batch slice is the handler's: it may keep it after the call (the
// batcher never touches it again) and may change it (filter it with
// slices.DeleteFunc, reorder or replace elements). That changes nothing of
// which messages are acknowledged: every message of the batch as it was
// handed over is, with the outcome it has when the handler returns.
type Handler[T any] func(ctx context.Context, batch []*message.Message[T], info message.BatchInfo) error

// Options configure one named batcher.
type Options[T any] struct {
	// Name is the batcher's name, which processors route to with
	// m.SetBatcher; message.DefaultBatcher ("default") receives the
	// messages nobody routed. Required, unique within a pipeline, and made
	// of letters, digits and "-_.:/@" only (see validate.ValidName).
	Name string `validate:"required,name"`
	// BatchSize is the number of messages at which a batch is emitted, at
	// most BatchSizeLimit. Default 100.
	BatchSize int `validate:"gte=1,lte=1000000"`
	// Weight, when set, gives each message a weight (for example its size
	// in bytes) and bounds batches by their total weight as well as by
	// BatchSize (Broadway's batch_size: {acc, fun}). A batch is emitted
	// with trigger message.TriggerWeight before a message would push its
	// total past MaxWeight (that message starts the next batch), or as
	// soon as its total reaches MaxWeight. A message heavier than
	// MaxWeight on its own makes a batch by itself. A negative weight
	// counts as 0. It is called once per message, on the batcher's
	// goroutine; a panic in it fails that message with a
	// *message.PanicError, which joins no batch and is acknowledged at
	// once; ending the goroutine with runtime.Goexit (t.FailNow does)
	// fails it with message.ErrHandlerExited the same way, and another
	// goroutine goes on with the other messages. Set both Weight and
	// MaxWeight, or neither. Default nil.
	Weight func(m *message.Message[T]) int
	// MaxWeight is the largest total weight of a batch, between 1 and
	// MaxWeightLimit; see Weight, which it requires. Default 0 (no weight
	// bound).
	MaxWeight int `validate:"omitempty,gte=1,lte=1099511627776"`
	// BatchTimeout is how long after its first message a batch that has not
	// filled up is emitted anyway. Default 1s; a value set must be above 0,
	// at most BatchTimeoutLimit (24h). A source releasing a feed (a
	// revoked Kafka partition) has open batches emitted without waiting
	// for it (producer.Feed.FlushInFlight).
	BatchTimeout time.Duration `validate:"gt=0,lte=24h"`
	// MaxDemand is how many messages a batcher partition takes from its
	// input queue at once before it sorts them into batches (Broadway's
	// max_demand of a batcher). Larger takes fewer turns under load; a
	// batch still grows to BatchSize whatever MaxDemand is. At most
	// MaxDemandLimit. Default 64.
	MaxDemand int `validate:"gte=1,lte=10000"`
	// Concurrency is the number of batch processors calling Handle. With
	// PartitionBy it is also the number of batcher partitions, each with
	// its own batch processor. At most ConcurrencyLimit. Default 1.
	Concurrency int `validate:"gte=1,lte=10000"`
	// QueueCapacity, when set, is the capacity of each batcher partition's
	// input queue, in messages: how many messages the processors have
	// handed to the batcher and it has not taken yet. Default 0: the
	// pipeline derives it, max(2·BatchSize, 64) (docs/architecture.md,
	// "How messages move between stages"). Set it, with
	// BatchQueueCapacity, when messages are large and memory, not
	// throughput, is what limits the pipeline (docs/operations.md,
	// "Sizing memory for large records"). A queue smaller than MaxDemand
	// or BatchSize works: a batch grows as its messages arrive, whatever
	// the queue holds. It costs throughput: the processors wait for room
	// more often, and a partition wakes for fewer messages at a time.
	// Between 1 and QueueCapacityLimit, and with PartitionBy Concurrency ×
	// QueueCapacity at most QueueCapacityLimit.
	QueueCapacity int `validate:"omitempty,gte=1,lte=1048576"`
	// BatchQueueCapacity, when set, is the capacity of the queue of
	// emitted batches waiting for a batch processor, in batches (with
	// PartitionBy, of each partition's own queue). Default 0: the pipeline
	// derives it, max(2·Concurrency, ⌈64/BatchSize⌉) without PartitionBy
	// and max(2, ⌈64/BatchSize⌉) each with it, so that small batches queue
	// about 64 messages. Each batch holds up to BatchSize messages, so
	// this queue holds up to BatchQueueCapacity·BatchSize of them: set it
	// small (1 is the least) to hold fewer large messages. It costs
	// throughput: a partition waits for a batch processor sooner, and a
	// batch processor takes fewer batches each time it wakes. Between 1
	// and BatchQueueCapacityLimit, and with PartitionBy Concurrency ×
	// BatchQueueCapacity at most BatchQueueCapacityLimit.
	BatchQueueCapacity int `validate:"omitempty,gte=1,lte=65536"`
	// PartitionBy, when set, splits the batcher into Concurrency partitions:
	// messages with the same key go to the same partition and are batched
	// and handled in the order they arrived. Nil (the default) makes one
	// batcher feed all batch processors. It is called once per message, by
	// the processor that hands the message to the batcher, and not at all
	// when Concurrency is 1 (there is one partition). A panic in it
	// fails that message with a *message.PanicError; it joins no batch and
	// is acknowledged at once (HandleFailed does not see it). Ending the
	// goroutine with runtime.Goexit (t.FailNow does) fails the messages
	// the processor had not handed on yet with message.ErrHandlerExited,
	// and another goroutine takes over as that processor.
	PartitionBy func(m *message.Message[T]) string
	// Handle is called with every batch. Required.
	Handle Handler[T] `validate:"required"`
	// HandleFailed, when set, is called with the failed messages of a batch
	// before they are acknowledged (Broadway's handle_failed). It may change
	// how they are acknowledged with m.SetDisposition. A panic in it is
	// logged and the messages are acknowledged with whatever it changed
	// before it panicked. It sees the batch of a handler that panicked or
	// ended its goroutine (runtime.Goexit; see Handler), but is not called
	// again after it ended its own. It sees interrupted messages (see
	// Handler) too, but cannot make them anything but a retry. The slice
	// is reused: do not keep it after the call.
	HandleFailed func(ctx context.Context, failed []*message.Message[T], info message.BatchInfo)
}

// Validate reports every broken rule of o, which carries its defaults (see
// WithDefaults). It returns nil or a validate.Errors value; uniqueness of
// names and the "default" batcher are the pipeline's rules.
func (o Options[T]) Validate() error { return o.ValidateAs("") }

// ValidateAs is Validate with every field path rooted at path
// ("batchers[0]" in a pipeline). pipeline.New calls it.
func (o Options[T]) ValidateAs(path string) error {
	return validate.Join(validate.Struct(path, &o), o.checkWeight(path),
		o.checkQueue(path, "queueCapacity", "queueSlots", o.QueueCapacity, QueueCapacityLimit),
		o.checkQueue(path, "batchQueueCapacity", "batchSlots", o.BatchQueueCapacity, BatchQueueCapacityLimit))
}

// checkQueue reports the bound on one kind of queue of a partitioned
// batcher, all of them together: Concurrency × capacity at most limit. It
// returns nil without PartitionBy, and when a field is out of its own
// bounds, which the tags report.
func (o Options[T]) checkQueue(path, field, rule string, capacity, limit int) error {
	if o.PartitionBy == nil || o.Concurrency < 1 || o.Concurrency > ConcurrencyLimit ||
		capacity < 1 || capacity > limit || o.Concurrency*capacity <= limit {
		return nil
	}
	return validate.Field(join(path, field), rule, fmt.Sprintf(
		"must be ≤ %d with partitionBy and %s (concurrency × %s must be ≤ %d)",
		limit/o.Concurrency, join(path, fmt.Sprintf("concurrency %d", o.Concurrency)), field, limit))
}

// checkWeight reports the rule between Weight and MaxWeight, which struct
// tags cannot phrase: both or neither.
func (o Options[T]) checkWeight(path string) error {
	switch {
	case o.Weight != nil && o.MaxWeight == 0:
		return validate.Field(join(path, "maxWeight"), "required_with", "is required with weight")
	case o.Weight == nil && o.MaxWeight != 0:
		return validate.Field(join(path, "weight"), "required_with", "is required with maxWeight")
	}
	return nil
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options[T]) WithDefaults() Options[T] {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchTimeout == 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxDemand == 0 {
		o.MaxDemand = DefaultMaxDemand
	}
	return o
}
