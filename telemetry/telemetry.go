// Package telemetry is the pipeline's hook API, in the manner of Broadway's
// :telemetry events: functions a pipeline calls when a processor starts
// and ends a chunk and a message, when HandleFailed has run, when a
// batcher emits a batch and a batch processor handles it, and when the
// pipeline starts and stops; and functions a Kafka source calls when its
// group member is assigned a partition and when it lets one go. Metrics
// collectors and tracing sit on it, and users attach their own.
//
// Every hook is optional: a nil *Hooks, or a nil field, is off. A hook is
// called synchronously on the stage's goroutine, with its event passed by
// value, so that calling it allocates nothing: it must be quick, safe for
// concurrent use (stages call it from many goroutines) and must not keep
// what the event points to. A hook that panics is recovered: the panic is
// logged at error level, once per panicking call, with the hook's name
// ("hook") and the stage that called it, and the work the hook observed
// goes on as if the hook had returned (a message or batch keeps the outcome
// its handler gave it, the pipeline starts or stops all the same, a Kafka
// partition is claimed or let go all the same). The recovery costs a
// deferred call per hook call and allocates nothing. A hook that ends its
// goroutine (runtime.Goexit, as t.FailNow does) is logged too, and treated
// as the user code around it would be: ChunkStart, the message hooks and
// the processors' HandleFailed hook fail the chunk's messages with
// message.ErrHandlerExited (those failed before keep their error), as
// BatchStart does the batch's, and HandleFailed then sees them (not after
// an exit in the HandleFailed hook, which runs once HandleFailed has
// returned); the batchers' HandleFailed hook, BatchEmit, ChunkStop and
// BatchStop change no outcome; the pipeline starts and stops all the same
// after an exit in PipelineStart (which ends the goroutine that called
// Start or Run; the context given to Run still stops the pipeline) or
// PipelineStop; a Kafka source calls PartitionAssigned and
// PartitionRevoked on a goroutine of their own, so an exit there ends
// only that call and the partition is claimed or let go all the same.
// docs/architecture.md has the table.
//
// # Events and their cost
//
// A duration is the difference of two readings of the monotonic clock (one
// runtime nanotime each, about half the cost of time.Now). Where a reading
// is shared, the sharing is part of the event's meaning, as listed. A
// processor times one chunk in Hooks.DurationSampling (64 by default): the
// chunk and message events of a timed chunk carry their Duration and have
// Timed set; those of the other chunks are called all the same, with
// Duration 0 and Timed false. A hook that records latencies records the
// timed events, a sample of every processor's chunks in the order they
// came; one that counts counts every event.
//
//   - PipelineStart: Name, Stages. Once per run; allocates the stage list.
//   - PipelineStop: Name, Stages, Err, Duration (from the start of the
//     run to its end). Once per run.
//   - ChunkStart: Stage, Processor, Size. One call per chunk, no clock.
//   - ChunkStop: the same, Timed and Duration, from before Prepare to
//     after the chunk's outcomes were acknowledged and its messages handed
//     to their batchers. One reading at each end of a timed chunk, none for
//     the others.
//   - MessageStart: Stage, Processor, before the handler is given the
//     message. One call per message, no clock.
//   - MessageStop and MessageException: Stage, Processor, Err (what the
//     handler returned or failed the message with; the *message.PanicError
//     for an exception), Timed and Duration. In a timed chunk the processor
//     reads the clock once per message, after its handler returns (in the
//     other chunks, never): a message's Duration runs
//     from the previous message's stop in the same chunk (for the chunk's
//     first message, from the chunk's start or the end of Prepare) to its
//     own stop. It therefore includes, beside the handler, the
//     processor's own work on the message before it (routing it, tens of
//     nanoseconds), MessageStart's own time, and any message of the chunk
//     that skipped the handler (failed in Prepare).
//   - HandleFailed: Stage, Count, Duration of the HandleFailed call. Two
//     readings per call, only for chunks or batches with failures.
//   - BatchEmit: Stage, Info. One call per batch, no clock.
//   - BatchStart: Stage, BatchProcessor, Info, before the batch handler.
//     One call per batch.
//   - BatchStop: the same, Failed and Duration, from before the handler
//     to after the batch's outcomes were acknowledged. Two readings per
//     batch.
//   - PartitionAssigned and PartitionRevoked (Kafka source): one call per
//     partition claimed or let go, no clock.
//
// The stage loops test once, when the pipeline is built, which hooks are
// set: without message hooks a processor pays nothing per message, and
// without hooks at all a nil check per chunk and per batch. NoDurations
// declares that the hooks read no Duration: the pipeline then reads no
// clock for them, and a hook set that only counts pays for its calls
// alone. DurationSampling 1 times every chunk and message, at a clock
// reading per message. docs/performance.md ("Telemetry hooks") has the
// measured cost of each.
package telemetry

import (
	"context"
	"time"

	"github.com/boulevard-go/boulevard/message"
)

// Hooks are the functions a pipeline calls; nil fields are off.
type Hooks struct {
	// PipelineStart is called when the pipeline has started, with its
	// stages (Broadway's topology init), by Start before any stage runs.
	// It may stop the pipeline: Stop called from it returns at once, and
	// the pipeline stops once it has returned (see pipeline.Pipeline.Stop).
	PipelineStart func(ctx context.Context, e Pipeline)
	// PipelineStop is called when the pipeline has stopped, with what
	// stopped it abnormally, if anything.
	PipelineStop func(ctx context.Context, e Pipeline)
	// ChunkStart is called when a processor takes a chunk (Broadway's
	// [:broadway, :processor, :start]).
	ChunkStart func(ctx context.Context, e Chunk)
	// ChunkStop is called when a processor is done with a chunk: its
	// messages handled, acknowledged or handed to their batchers.
	ChunkStop func(ctx context.Context, e Chunk)
	// MessageStart is called before the handler is given a message
	// ([:broadway, :processor, :message, :start]).
	MessageStart func(ctx context.Context, e Message)
	// MessageStop is called when the handler returned, Err set when it
	// failed the message.
	MessageStop func(ctx context.Context, e Message)
	// MessageException is called instead of MessageStop when the handler
	// panicked; Err is the *message.PanicError.
	MessageException func(ctx context.Context, e Message)
	// HandleFailed is called once a stage's HandleFailed hook has run on
	// its failed messages.
	HandleFailed func(ctx context.Context, e Failed)
	// BatchEmit is called when a batcher emits a batch ([:broadway,
	// :batcher, ...]), before a batch processor takes it.
	BatchEmit func(ctx context.Context, e Batch)
	// BatchStart is called before the batch handler is given a batch
	// ([:broadway, :batch_processor, :start]).
	BatchStart func(ctx context.Context, e Batch)
	// BatchStop is called when the batch's outcomes have been
	// acknowledged.
	BatchStop func(ctx context.Context, e Batch)

	// PartitionAssigned is called by a Kafka source whose Options carry
	// these hooks when its group member starts consuming a partition
	// (BroadwayKafka's assignments events). It is not a pipeline event:
	// the pipeline's Telemetry option does not reach the source.
	PartitionAssigned func(ctx context.Context, e Assignment)
	// PartitionRevoked is called by such a source when the member has
	// let a partition go: its claim ended, its messages were settled and
	// its offsets committed (or the commit given up).
	//
	// The source calls both on a goroutine of their own and waits for it:
	// a panic or an exit (runtime.Goexit) in them is logged once and the
	// member goes on as if the hook had returned.
	PartitionRevoked func(ctx context.Context, e Assignment)

	// NoDurations, when true, tells the pipeline that these hooks do not
	// read the events' Duration: it then reads no clock for them and
	// every Duration is 0 (Pipeline.Duration excepted). Hooks that only
	// count pay then only for their calls.
	NoDurations bool
	// DurationSampling is how often a processor times a chunk: it times
	// one chunk in DurationSampling (its 1st, then every
	// DurationSampling-th), and only the ChunkStop, MessageStop and
	// MessageException events of a timed chunk carry a Duration, with
	// Timed set; those of the other chunks carry Duration 0 and Timed
	// false. Every event is still called. 1 times every chunk and every
	// message; 0 means DefaultDurationSampling. Batch and HandleFailed
	// durations are measured on every event. Must be ≥ 0 and at most
	// math.MaxUint32 (4294967295), the range of a processor's chunk count.
	DurationSampling int `validate:"gte=0,lte=4294967295"`
}

// DefaultDurationSampling is the default Hooks.DurationSampling: a processor
// times one chunk in 64, as it does for Pipeline.Stats. Reading the clock
// costs as much as the rest of a message's trip through the pipeline on
// some machines (about 85 ns on a virtual machine); one chunk in 64 keeps
// the hooks' cost within a few percent of an empty handler while timing
// enough messages for a latency distribution.
const DefaultDurationSampling = 64

// Pipeline describes a pipeline starting or stopping.
type Pipeline struct {
	// Name is the pipeline's name.
	Name string
	// Stages are the pipeline's stage names: producer stages, the
	// processors, the batchers. Shared: do not change it.
	Stages []string
	// Err is what stopped the pipeline abnormally (stop only).
	Err error
	// Duration is how long it ran (stop only).
	Duration time.Duration
}

// Chunk describes a processor's chunk.
type Chunk struct {
	// Stage is the processors' stage name, "<pipeline>.processor".
	Stage string
	// Processor is the processor's index.
	Processor int
	// Size is the number of messages in the chunk.
	Size int
	// Duration is how long the processor spent on it (stop only, when
	// Timed).
	Duration time.Duration
	// Timed reports that the chunk was timed (see
	// Hooks.DurationSampling): Duration is measured (stop only).
	Timed bool
}

// Message describes one message at its handler.
type Message struct {
	// Stage is the processors' stage name.
	Stage string
	// Processor is the processor's index.
	Processor int
	// Err is why the handler failed the message (stop and exception).
	Err error
	// Duration is how long the handler took (stop and exception, when
	// Timed).
	Duration time.Duration
	// Timed reports that the message's chunk was timed (see
	// Hooks.DurationSampling): Duration is measured (stop and exception).
	Timed bool
}

// Failed describes a HandleFailed call.
type Failed struct {
	// Stage is the processors' or the batcher's stage name.
	Stage string
	// Count is the number of failed messages it was given.
	Count int
	// Duration is how long it took.
	Duration time.Duration
}

// Batch describes a batch.
type Batch struct {
	// Stage is the batcher's stage name, "<pipeline>.batcher.<name>".
	Stage string
	// BatchProcessor is the batch processor's index (start and stop).
	BatchProcessor int
	// Info is the batch's BatchInfo.
	Info message.BatchInfo
	// Failed is the number of its messages that failed (stop only).
	Failed int
	// Duration is how long the batch processor spent on it (stop only).
	Duration time.Duration
}

// Assignment describes one partition of a consumer group member's
// assignment, given or taken away.
type Assignment struct {
	// Group is the consumer group.
	Group string
	// Member is the member id the group coordinator gave the member.
	Member string
	// Generation is the group generation in which the partition was
	// claimed.
	Generation int32
	// Topic and Partition are the partition.
	Topic     string
	Partition int32
}
