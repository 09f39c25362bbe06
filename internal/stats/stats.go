// Package stats holds the counters the stage runtime keeps for
// Pipeline.Stats: per-goroutine shards that only their owner goroutine
// writes (an atomic load and store, no read-modify-write, no lock, no
// allocation) and any goroutine may read at any time, and the snapshot
// types they add up to.
package stats

import (
	"sync/atomic"
	"time"
)

// Counter is a counter written by one goroutine and read by any. Add must
// only be called by its owner: it is a plain load and store, cheaper than
// an atomic add, and correct because no other goroutine writes.
type Counter struct{ v atomic.Uint64 }

// Add adds n; only the owner goroutine calls it.
func (c *Counter) Add(n uint64) { c.v.Store(c.v.Load() + n) }

// Load returns the counter's value.
func (c *Counter) Load() uint64 { return c.v.Load() }

// LatencyBounds are the upper bounds, in seconds, of the buckets of every
// handler-duration histogram.
var LatencyBounds = []float64{0.00001, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}

// SizeBounds are the upper bounds of the buckets of every batch-size
// histogram.
var SizeBounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}

// maxBuckets is the most buckets a Recorder has (bounds plus +Inf).
const maxBuckets = 16

// Recorder is a histogram written by one goroutine and read by any.
type Recorder struct {
	bounds []float64
	counts [maxBuckets]Counter
	sum    Counter // in the unit's smallest integer step (ns for durations)
	scale  float64 // sum·scale is the sum in the histogram's unit
}

// NewLatency returns a recorder of durations in LatencyBounds.
func NewLatency() *Recorder { return &Recorder{bounds: LatencyBounds, scale: 1e-9} }

// NewSize returns a recorder of sizes in SizeBounds.
func NewSize() *Recorder { return &Recorder{bounds: SizeBounds, scale: 1} }

// ObserveDuration records d; only the owner goroutine calls it.
func (r *Recorder) ObserveDuration(d time.Duration) {
	if d < 0 {
		d = 0
	}
	r.observe(d.Seconds(), uint64(d))
}

// ObserveSize records n; only the owner goroutine calls it.
func (r *Recorder) ObserveSize(n int) { r.observe(float64(n), uint64(n)) }

func (r *Recorder) observe(v float64, raw uint64) {
	i := 0
	for i < len(r.bounds) && v > r.bounds[i] {
		i++
	}
	// The sum before the count, which AddTo reads in the other order.
	r.sum.Add(raw)
	r.counts[i].Add(1)
}

// AddTo adds the recorder's counts to h, whose Bounds it sets when empty.
func (r *Recorder) AddTo(h *Histogram) {
	if h.Bounds == nil {
		h.Bounds = r.bounds
		h.Counts = make([]uint64, len(r.bounds)+1)
	}
	// The counts before the sum, which observe writes in the other order:
	// a reader never sees a count without its sum, only (briefly) a sum
	// ahead of its counts.
	for i := range h.Counts {
		c := r.counts[i].Load()
		h.Counts[i] += c
		h.Count += c
	}
	h.Sum += float64(r.sum.Load()) * r.scale
}

// Histogram is a snapshot of a distribution.
type Histogram struct {
	// Bounds are the buckets' upper bounds (inclusive), ascending; a last
	// bucket, +Inf, is implied.
	Bounds []float64
	// Counts are the observations per bucket (not cumulative), one more
	// than Bounds: the last one counts what is above every bound.
	Counts []uint64
	// Count is the number of observations, Sum their sum (seconds for
	// durations, messages for sizes).
	Count uint64
	Sum   float64
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) by linear interpolation
// inside the bucket it falls in, as Prometheus's histogram_quantile does;
// 0 without observations. A quantile in the last bucket is reported as the
// highest bound.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	rank := q * float64(h.Count)
	var seen float64
	for i, c := range h.Counts {
		if c == 0 || seen+float64(c) < rank {
			seen += float64(c)
			continue
		}
		if i == len(h.Bounds) {
			return h.Bounds[len(h.Bounds)-1]
		}
		lo := 0.0
		if i > 0 {
			lo = h.Bounds[i-1]
		}
		return lo + (h.Bounds[i]-lo)*(rank-seen)/float64(c)
	}
	return h.Bounds[len(h.Bounds)-1]
}

// Failures counts failed messages by the disposition they were
// acknowledged with.
type Failures struct {
	// Default: the source's own failure policy applies.
	Default uint64
	// Retry: the source is asked to deliver the message again (this
	// includes what the pipeline's own shutdown interrupted).
	Retry uint64
	// Discard: the source is told the message is done with.
	Discard uint64
}

// Total is the number of failed messages.
func (f Failures) Total() uint64 { return f.Default + f.Retry + f.Discard }

// Add adds g to f.
func (f *Failures) Add(g Failures) {
	f.Default += g.Default
	f.Retry += g.Retry
	f.Discard += g.Discard
}

// Count counts one failure with disposition d (acker.Disposition's
// values: 0 default, 1 retry, 2 discard) in f: a plain count, for a tally
// its owner stores into FailureCounters once (FailureCounters.Store).
func (f *Failures) Count(d uint8) {
	switch d {
	case 1:
		f.Retry++
	case 2:
		f.Discard++
	default:
		f.Default++
	}
}

// FailureCounters is Failures as counters owned by one goroutine.
type FailureCounters struct{ Default, Retry, Discard Counter }

// Store adds the tally f to the counters, storing only those it changes;
// only the owner calls it.
func (c *FailureCounters) Store(f Failures) {
	if f.Default > 0 {
		c.Default.Add(f.Default)
	}
	if f.Retry > 0 {
		c.Retry.Add(f.Retry)
	}
	if f.Discard > 0 {
		c.Discard.Add(f.Discard)
	}
}

// Count counts one failure with disposition d (acker.Disposition's
// values: 0 default, 1 retry, 2 discard); only the owner calls it.
func (f *FailureCounters) Count(d uint8) {
	switch d {
	case 1:
		f.Retry.Add(1)
	case 2:
		f.Discard.Add(1)
	default:
		f.Default.Add(1)
	}
}

// AddTo adds the counters to dst.
func (f *FailureCounters) AddTo(dst *Failures) {
	dst.Default += f.Default.Load()
	dst.Retry += f.Retry.Load()
	dst.Discard += f.Discard.Load()
}

// Processors is a snapshot of a pipeline's processors.
type Processors struct {
	// Stage is the stage's name, "<pipeline>.processor".
	Stage string
	// Concurrency is the number of processors; Running how many of them
	// have not returned.
	Concurrency, Running int
	// In counts the messages the processors took from their queues,
	// including those a drain cut short left in them, which the stage
	// takes once every processor has stopped and counts in Unhandled.
	In uint64
	// Succeeded counts the messages the handler returned without error
	// (acknowledged, or handed to their batcher); Failed the messages that
	// failed (in Prepare, the handler, routing or PartitionBy), by
	// disposition once HandleFailed ran.
	Succeeded uint64
	Failed    Failures
	// Unhandled counts the messages taken in that a drain cut short left
	// without an outcome from the processors: still queued for them, in a
	// chunk before the handler saw them (but not one Prepare deferred,
	// message.Defer, whose outcome is its deferrer's: it counts in
	// Succeeded), or handled but not taken by
	// their batcher (counted there, and not in Succeeded; but a message
	// acknowledged with its chunk, message.AckImmediately, or deferred,
	// message.Defer, had its outcome reported, and counts in Succeeded).
	// It equals the sum of the "messages" attributes of the processors'
	// shutdown-timeout warnings, and In = Succeeded + Failed + Unhandled
	// once the processors have stopped.
	Unhandled uint64
	// InFlight is the number of messages in the chunks the processors
	// hold now.
	InFlight int
	// Queued is the number of messages waiting in the processors' queues,
	// QueueCapacity the capacity of all of them together.
	Queued, QueueCapacity int
	// Busy is the time the processors spent handling chunks, all of them
	// together, estimated from one chunk in 64 (each processor times its
	// 1st, 65th, … chunk, see Busy): never more than the time the
	// processors ran, and behind by up to 63 chunks of each processor
	// until it times the next one or stops; BusyRatio is Busy ÷
	// (Concurrency × the time since Start), from 0 (idle) to 1 (every
	// processor always busy; the estimate is clamped there).
	Busy      time.Duration
	BusyRatio float64
	// Latency is the handler's duration (seconds), sampled on the first
	// message of the chunks timed for Busy.
	Latency Histogram
	// LongestCall is how long the longest-running chunk a processor holds
	// has been running (0 when none holds one): a chunk of up to MaxDemand
	// messages, not one handler call, from the moment the processor takes
	// it until its acknowledgers have returned and its messages are handed
	// to their batchers: Prepare, the handler on each of its messages one
	// after the other, HandleFailed, acknowledging, and handing on, which
	// waits for room in a full batcher's queue. Processors read no clock
	// for it: a chunk is dated
	// from the first reading of the counters that saw it (a Stats call,
	// or the pipeline's own reading every Options.StallCheckInterval), so
	// the age is short by up to that interval, and a chunk over within
	// it may never show. See Calls.
	LongestCall time.Duration
}

// Batcher is a snapshot of one batcher and its batch processors.
type Batcher struct {
	// Name is the batcher's name, Stage the stage's name,
	// "<pipeline>.batcher.<name>".
	Name, Stage string
	// Concurrency is the number of batch processors.
	Concurrency int
	// In counts the messages the batcher took from its queue, including
	// those a drain cut short left in it, which the batcher takes once it
	// has stopped and counts in Unhandled.
	In uint64
	// Batches counts the batches emitted, by trigger name ("size",
	// "timeout", "flush", …).
	Batches map[string]uint64
	// Sizes is the distribution of the emitted batches' sizes (messages).
	Sizes Histogram
	// Succeeded and Failed count the messages of handled batches by
	// outcome (Failed by disposition once HandleFailed ran).
	Succeeded uint64
	Failed    Failures
	// Unhandled counts the messages taken in that a drain cut short left
	// unacknowledged (still queued for the batcher, in open batches, or in
	// batches no batch processor handled), counted once the batcher has
	// stopped. It equals the sum of the "messages" attributes of the
	// batcher's shutdown-timeout warnings.
	Unhandled uint64
	// Dropped counts the messages taken in that a drain cut short left
	// behind in the same places, but whose outcome was not the batcher's
	// to report: acknowledged by their processor already
	// (message.AckImmediately), or deferred (message.Defer). No batch
	// handler saw them, and nothing is owed to their acknowledger, so they
	// are not in Unhandled. It equals the sum of the "dropped" attributes
	// of the batcher's shutdown-timeout warnings, and In = Succeeded +
	// Failed + Unhandled + Dropped + InFlight.
	Dropped uint64
	// InFlight is the number of messages taken in and not yet
	// acknowledged: in open batches, waiting for a batch processor, or in
	// the batch handler.
	InFlight int
	// Queued is the number of messages waiting in the batcher's input
	// queues, QueueCapacity their capacity together; QueuedBatches the
	// batches waiting for a batch processor, BatchQueueCapacity the
	// capacity of their queues together (in batches).
	Queued, QueueCapacity, QueuedBatches, BatchQueueCapacity int
	// Busy is the time the batch processors spent in the batch handler,
	// all of them together, estimated from a sample of the batches: each
	// batch processor times one batch in ⌈64 ÷ BatchSize⌉ (every batch
	// when BatchSize ≥ 64; its 1st batch, then every ⌈64 ÷ BatchSize⌉-th,
	// see Busy): never more than the time the batch processors ran.
	// BusyRatio is Busy ÷ (Concurrency × the time since Start).
	Busy      time.Duration
	BusyRatio float64
	// Latency is the batch handler's duration (seconds) on the batches
	// timed for Busy: every batch when BatchSize ≥ 64, one in
	// ⌈64 ÷ BatchSize⌉ otherwise.
	Latency Histogram
	// LongestCall is how long the longest-running batch a batch
	// processor holds has been running (0 when none holds one), from the
	// moment it takes the batch up until its acknowledgers have returned:
	// the BatchStart hook, the batch handler, HandleFailed and
	// acknowledging (not the BatchStop hook). It is dated as the
	// processors' LongestCall is: short by up to the time between two
	// readings.
	LongestCall time.Duration
}

// Ratio is busy ÷ (workers × wall), clamped to [0, 1]; 0 when wall or
// workers is not positive.
func Ratio(busy time.Duration, workers int, wall time.Duration) float64 {
	if wall <= 0 || workers <= 0 {
		return 0
	}
	return min(max(float64(busy)/(float64(workers)*float64(wall)), 0), 1)
}
