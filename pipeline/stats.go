package pipeline

import (
	"time"

	"github.com/boulevard-go/boulevard/internal/stats"
	"github.com/boulevard-go/boulevard/producer"
)

// Stats is a snapshot of a running pipeline (Pipeline.Stats). Counters
// count from Start and never go down.
type Stats struct {
	// Name is the pipeline's name.
	Name string
	// Time is when the snapshot was taken; Started when the pipeline
	// started (zero before Start).
	Time, Started time.Time
	// Stopped reports whether the pipeline has stopped: every goroutine
	// it started has returned (Done is closed), or it stopped waiting
	// for goroutines that ignore their context, as Stop and Run do when
	// they return a *ShutdownTimeoutError (those goroutines may still run
	// until they return; Done is closed then). Err is what stopped it
	// abnormally (see Pipeline.Err), nil otherwise.
	Stopped bool
	Err     error
	// Producers are the producer stages, in stage order (none for a
	// push-only pipeline).
	Producers []ProducerStats
	// Processors are the processors' counters.
	Processors ProcessorStats
	// Batchers are the batchers' counters, in declaration order.
	Batchers []BatcherStats
	// RateLimit is the rate limit in force, nil when there is none.
	RateLimit *producer.RateLimit
}

// ProducerStats is one producer stage.
type ProducerStats struct {
	// Status is the stage's state, restarts and last error, as
	// Pipeline.SourceStatus reports it.
	producer.StageStatus
	// Buffered is the number of delivered messages waiting in the stage
	// buffer for room in the processors' queues.
	Buffered int
	// Unhandled counts the messages the stage's source delivered that a
	// drain cut short left in the stage, never handed to the processors:
	// they stay unacknowledged (producer.Stage.Unhandled). It equals the
	// "messages" of the stage's shutdown-timeout warning.
	Unhandled uint64
	// Feeds are the permit counters of the feeds the stage's source has
	// open (producer.Stage.FeedStats): permits granted and outstanding,
	// messages delivered and dispatched.
	Feeds []producer.NamedFeedStats
	// LongestHandOff is how long the stage's hand-over of delivered
	// messages to the processors has been running their PartitionBy
	// (user code, on the source's goroutine or the stage's dispatching
	// one): 0 when none runs, and always 0 without PartitionBy. A stage
	// hands over one batch of messages at a time; while a PartitionBy
	// blocks, the source is stopped and the processors are idle.
	// Options.StallThreshold and the stall lines apply to it as to the
	// processors' LongestCall (see producer.Stage.HandOffAge).
	LongestHandOff time.Duration
}

// ProcessorStats is a snapshot of the processors: messages in, succeeded,
// failed by disposition, in flight, queue fill, busy ratio and the
// handler's duration. See docs/observability.md for every field.
type ProcessorStats = stats.Processors

// BatcherStats is a snapshot of one batcher and its batch processors:
// messages in, batches by trigger, batch sizes, the batch handler's
// duration (timed on one batch in ⌈64/BatchSize⌉, every batch from
// BatchSize 64 up), outcomes and busy ratio. See docs/observability.md.
type BatcherStats = stats.Batcher

// Histogram is a snapshot of a distribution: bucket bounds, the count in
// each bucket, and the observations' count and sum.
type Histogram = stats.Histogram

// Failures counts failed messages by disposition.
type Failures = stats.Failures

// Stats returns a snapshot of the pipeline's counters. It is safe to call
// from any goroutine at any time, takes no lock on the message path (the
// stages keep their counters in per-goroutine atomics) and allocates only
// the snapshot: cheap enough to poll every second.
func (p *Pipeline[In, Out]) Stats() Stats {
	now := time.Now()
	if !p.built() {
		return Stats{Time: now}
	}
	st := Stats{Name: p.opts.Name, Time: now, RateLimit: p.prod.RateLimit()}
	var wall time.Duration
	if ns := p.startedAt.Load(); ns != 0 {
		st.Started = time.Unix(0, ns)
		wall = now.Sub(st.Started)
	}
	select {
	case <-p.done:
		st.Stopped = true
	case <-p.abandoned:
		st.Stopped = true
	default:
		st.Stopped = p.timedOut.Load()
	}
	st.Err = p.Err()
	stages := p.prod.Stages()
	for i, s := range p.SourceStatus() {
		ps := ProducerStats{StageStatus: s}
		if i < len(stages) {
			ps.Buffered = stages[i].Buffered()
			ps.Unhandled = stages[i].Unhandled()
			ps.Feeds = stages[i].FeedStats()
			ps.LongestHandOff = stages[i].HandOffAge(now)
		}
		st.Producers = append(st.Producers, ps)
	}
	st.Processors = p.proc.Stats(wall)
	for _, b := range p.batchers {
		st.Batchers = append(st.Batchers, b.Stats(wall))
	}
	return st
}
