package pipeline

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
	"github.com/boulevard-go/boulevard/validate"
)

// DefaultShutdownTimeout is the default Options.ShutdownTimeout.
const DefaultShutdownTimeout = 30 * time.Second

// DefaultFailureLogInterval is the default Options.FailureLogInterval.
const DefaultFailureLogInterval = 10 * time.Second

// MaxFailureLogInterval bounds Options.FailureLogInterval.
const MaxFailureLogInterval = time.Hour

// DefaultStallThreshold is the default Options.StallThreshold: as long
// as the default ShutdownTimeout, since a handler call that runs longer
// cannot end within a default drain.
const DefaultStallThreshold = 30 * time.Second

// MaxStallThreshold bounds Options.StallThreshold.
const MaxStallThreshold = 24 * time.Hour

// DefaultStallCheckInterval is the default Options.StallCheckInterval.
const DefaultStallCheckInterval = time.Second

// MinStallCheckInterval and MaxStallCheckInterval bound a positive
// Options.StallCheckInterval; any negative value turns the stall watch
// off.
const (
	MinStallCheckInterval = 10 * time.Millisecond
	MaxStallCheckInterval = time.Minute
)

// Options declare a pipeline. In is the payload type the source produces; Out
// is the payload type processors turn it into, which batchers receive (use
// the same type for both when processors do not change it).
//
// Zero fields take their documented defaults. New validates everything before
// anything starts and reports every broken rule with the field's path, for
// example "processors.concurrency must be ≥ 1".
type Options[In, Out any] struct {
	// Name identifies the pipeline in logs and stage names. Required: 1 to
	// 255 bytes of letters, digits and "-_.:/@" (no whitespace or control
	// characters, see validate.ValidName), so that it can be written into
	// logs and errors as it is.
	Name string `validate:"required,name"`
	// Logger receives the pipeline's logs. Nil means slog.Default().
	Logger *slog.Logger `name:"-"`
	// FailureLogInterval keeps a burst of failures to a few log lines: the
	// pipeline logs the first failure of each kind in each stage at once
	// (a message failed, a handler, PartitionBy or Weight panicked,
	// Prepare failed a chunk, a batch handler failed or panicked), then,
	// for FailureLogInterval after it, only counts the like failures; the
	// next line of that kind carries how many were held back (held_back),
	// and each stage logs what it still holds back as it stops. Failures
	// are counted exactly all the same (Stats, Telemetry), and
	// HandleFailed sees every failed message. Default 10s
	// (DefaultFailureLogInterval); at most MaxFailureLogInterval (1h); a
	// negative value logs every failure, one line each.
	FailureLogInterval time.Duration `validate:"lte=1h"`
	// StallCheckInterval is how often the pipeline reads how long each
	// processor's chunk and each batch processor's batch has been running
	// (the stages' LongestCall in Stats, and the stall log lines). The
	// stages read no clock for it: a call is dated from the first reading
	// that saw it, so a LongestCall is short by up to StallCheckInterval,
	// and a call over within it may never show. A producer stage's
	// hand-over to the processors, which runs their PartitionBy, is
	// dated exactly instead (ProducerStats.LongestHandOff) and read at
	// the same interval for the stall lines. One goroutine per
	// pipeline reads, from Start until the stages have returned, with a
	// ticker always pending. Default 1s (DefaultStallCheckInterval);
	// 10ms … 1m (MinStallCheckInterval, MaxStallCheckInterval). A
	// negative value turns the watch off: no goroutine, no ticker, no
	// stall line, and LongestCall is dated by Stats calls alone (from
	// the first Stats call that saw a call). Tests in a testing/synctest
	// bubble set it negative, so that the bubble's deadlock detection
	// still sees a pipeline whose goroutines all wait.
	StallCheckInterval time.Duration `validate:"lte=1m"`
	// StallThreshold is how long a processor's chunk or a batch
	// processor's batch may run before the stage logs it: one WARN line
	// when a call of the stage has run longer than StallThreshold
	// (StallLog), and one INFO line once none has any longer
	// (StallEndedLog). Default 30s (DefaultStallThreshold); at most
	// MaxStallThreshold (24h); a negative value logs no stall (Stats
	// still reports LongestCall). A processor's chunk is up to
	// Processors.MaxDemand messages, so MaxDemand times the handler's
	// duration must stay under it. A producer stage's hand-over that
	// has run the processors' PartitionBy longer than StallThreshold is
	// logged the same way (see StallLog).
	StallThreshold time.Duration `validate:"lte=24h"`
	// Telemetry, when set, is called at the points of the pipeline's work
	// that package telemetry lists (Broadway's :telemetry events). Nil
	// (the default) is off and costs a nil check per chunk and per batch.
	// Its DurationSampling is validated with the rest.
	Telemetry *telemetry.Hooks
	// ShutdownTimeout bounds a drain: past it, handlers' contexts are
	// cancelled and messages not yet handled stay unacknowledged (so the
	// broker redelivers them). The source's Close gets as long again. Stop
	// and Run stop waiting for what ignores its context CancelGrace after
	// either (see Stop). Default 30s; a value set must be above 0. It has
	// no upper bound, as it is the bound of the drain itself:
	// time.Duration(math.MaxInt64) lets a drain take as long as its
	// handlers do.
	ShutdownTimeout time.Duration `validate:"gt=0"`
	// Drainers are waited for, in order, once every stage has returned
	// and before the source is closed: each one's Drain gets the context
	// the source's Close gets (ShutdownTimeout, shared with Close), so
	// that what settles messages after their handler returned (a topic
	// sink publishing with ack propagation, whose outcomes come from
	// downstream) has reported them before the source lets go of its
	// connections. A Drain that fails is returned by Stop, Run and Err as
	// a *DrainError; the others and the source's Close still run.
	// Default none; a nil entry is refused by New.
	Drainers []Drainer `name:"-"`
	// Producer configures the producer stages and their source.
	Producer producer.Options[In] `validate:"-"`
	// Processors configures the processors. Processors.Handle is required.
	Processors processor.Options[In, Out] `validate:"-"`
	// Batchers are the pipeline's named batchers. Without any, processors
	// acknowledge messages themselves. With some, every message that does
	// not fail goes to the batcher named by m.Batcher() ("default" unless a
	// processor routed it elsewhere), so one of them must be named
	// "default" unless ExplicitRouting is set. At most BatchersLimit
	// (100).
	Batchers []batcher.Options[Out] `validate:"max=100"`
	// ExplicitRouting declares that the processors route every message
	// with m.SetBatcher, so that the pipeline needs no batcher named
	// "default". Without it, New rejects a pipeline that has batchers but
	// none named "default", whose unrouted messages would all fail. With
	// it, a message left unrouted fails with a *processor.UnknownBatcherError,
	// as one routed to any missing batcher does. Default false.
	ExplicitRouting bool
	// PartitionBy, when set, partitions the processors and every batcher
	// by the same key (Broadway's top-level partition_by), so that one
	// function keeps a key's messages in order from the first stage to the
	// last: messages with the same key go to the same processor and, in
	// each batcher, to the same partition (each with its own batch
	// processor), and are handled in the order they arrived. A key maps to
	// partition FNV-1a(key) mod n, where n is Processors.Concurrency for
	// the processors and a batcher's Concurrency for that batcher; the
	// same key always maps to the same partition for the same n, and
	// different keys may share one. It sees a message through
	// message.Keyed, whatever its payload type; at a batcher, a message
	// acknowledged immediately carries no Metadata (see
	// message.AckImmediately). A panic in it fails that message with a
	// *message.PanicError. It replaces Processors.PartitionBy and every
	// Batchers[].PartitionBy, which must then be nil, and the partition
	// key an ordered source asks for (it decides ordering itself). Default
	// nil.
	PartitionBy func(m message.Keyed) string

	// partitioned: WithDefaults copied PartitionBy into every stage.
	partitioned bool
}

// WithDefaults returns o with every zero field replaced by its default,
// those of Producer, Processors and each batcher included. When the source
// is ordered (producer.Info.Ordered) and Processors.PartitionBy is nil,
// PartitionBy becomes the message's partition key. New applies it.
func (o Options[In, Out]) WithDefaults() Options[In, Out] {
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.FailureLogInterval == 0 {
		o.FailureLogInterval = DefaultFailureLogInterval
	}
	if o.StallCheckInterval == 0 {
		o.StallCheckInterval = DefaultStallCheckInterval
	}
	if o.StallThreshold == 0 {
		o.StallThreshold = DefaultStallThreshold
	}
	o.Producer = o.Producer.WithDefaults()
	o.Processors = o.Processors.WithDefaults()
	o = o.withPartitionBy()
	if o.Processors.PartitionBy == nil {
		// A source that needs ordering (Kafka partitions) keeps it unless
		// the user partitions the processors their own way.
		if info, _ := o.Producer.SourceInfo(); info.Ordered { // an error is Validate's to report
			o.Processors.PartitionBy = (*message.Message[In]).PartitionKey
		}
	}
	if len(o.Batchers) > 0 {
		bs := make([]batcher.Options[Out], len(o.Batchers))
		for i, b := range o.Batchers {
			bs[i] = b.WithDefaults()
		}
		o.Batchers = bs
	}
	return o
}

// Validate reports every broken rule of o, which carries its defaults (see
// WithDefaults): its own fields', those of Producer, Processors and each
// batcher (through their Validate, with paths such as
// "processors.concurrency" and "batchers[0].batchSize"), unique batcher
// names and the "default" batcher, and the source's own options. It
// returns nil or an error listing every problem. New calls it.
func (o Options[In, Out]) Validate() error {
	errs := []error{validate.Struct("", &o), o.Producer.ValidateAs("producer"), o.Processors.ValidateAs("processors")}
	if o.StallCheckInterval > 0 && o.StallCheckInterval < MinStallCheckInterval {
		errs = append(errs, validate.Field("stallCheckInterval", "gte",
			fmt.Sprintf("must be ≥ %v (or negative: no stall watch)", MinStallCheckInterval)))
	}
	seen := make(map[string]int, len(o.Batchers))
	unnamed := false
	for i, b := range o.Batchers {
		errs = append(errs, b.ValidateAs(fmt.Sprintf("batchers[%d]", i)))
		if b.Name == "" {
			unnamed = true
			continue
		}
		if j, dup := seen[b.Name]; dup {
			errs = append(errs, validate.Field(fmt.Sprintf("batchers[%d].name", i), "unique",
				fmt.Sprintf("must be unique: %q is already the name of batchers[%d]", b.Name, j)))
			continue
		}
		seen[b.Name] = i
	}
	if _, ok := seen[message.DefaultBatcher]; len(o.Batchers) > 0 && !ok && !unnamed && !o.ExplicitRouting {
		errs = append(errs, validate.Field("batchers", "default", fmt.Sprintf(
			"must include one named %q, which receives the messages no processor routes elsewhere (or set explicitRouting when every message is routed with SetBatcher)",
			message.DefaultBatcher)))
	}
	for i, d := range o.Drainers {
		if d == nil {
			// The pipeline calls every drainer's Drain when it stops.
			errs = append(errs, validate.Field(fmt.Sprintf("drainers[%d]", i), "required", "is required"))
		}
	}
	if o.PartitionBy != nil && !o.partitioned {
		errs = append(errs, validate.Field("partitionBy", "excluded_with",
			"must not be set with processors.partitionBy or a batcher's partitionBy: it partitions every stage"))
	}
	return validate.Join(errs...)
}

// withPartitionBy copies PartitionBy into the processors and every batcher
// when none of them has its own (Validate reports the conflict otherwise).
func (o Options[In, Out]) withPartitionBy() Options[In, Out] {
	if o.PartitionBy == nil || o.partitioned {
		return o
	}
	if o.Processors.PartitionBy != nil {
		return o
	}
	for _, b := range o.Batchers {
		if b.PartitionBy != nil {
			return o
		}
	}
	key := o.PartitionBy
	o.Processors.PartitionBy = func(m *message.Message[In]) string { return key(m) }
	bs := make([]batcher.Options[Out], len(o.Batchers))
	for i, b := range o.Batchers {
		b.PartitionBy = func(m *message.Message[Out]) string { return key(m) }
		bs[i] = b
	}
	o.Batchers = bs
	o.partitioned = true
	return o
}

// BatchersLimit is the most batchers a pipeline may have (Options.Batchers).
// Each batcher has its own partitions, batch processors and queues, and a
// processor finds the batcher a message is routed to by its name among
// them; to batch by many destinations, route to a few batchers and set
// batch keys (message.SetBatchKey) instead.
const BatchersLimit = 100
