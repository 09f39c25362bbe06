package batching

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/stats"
	"github.com/boulevard-go/boulevard/message"
)

// sampleMessages is how many messages a batch processor handles, about,
// between two readings of the clock for Stats: it times one batch in
// ⌈sampleMessages/BatchSize⌉ (every batch when BatchSize ≥ 64), as a
// processor times one chunk in 64. A clock reading costs up to 100ns on a
// virtual machine, more than the rest of a small batch's trip: timing every
// batch of one message doubled its cost.
const sampleMessages = 64

// sampleEvery is how often a batch processor of batches of batchSize times
// the batch handler: one batch in sampleEvery(batchSize).
func sampleEvery(batchSize int) uint32 {
	return uint32(max(1, (sampleMessages+batchSize-1)/max(batchSize, 1)))
}

// maxTriggers bounds the triggers counted apart; a trigger beyond it is
// counted with the last one.
const maxTriggers = 8

// partShard is one batcher partition's counters, written only by its
// goroutine.
type partShard struct {
	_       [64]byte // keeps the counters off the previous allocation's cache line
	in      stats.Counter
	failed  stats.FailureCounters // failed on their way in (a panicking PartitionBy)
	batches [maxTriggers]stats.Counter
	sizes   *stats.Recorder
}

// procShard is one batch processor's counters, written only by its
// goroutine.
type procShard struct {
	_ [64]byte
	// taken counts the messages of the batches the batch processor took
	// up, stored as it takes each one: the one store per batch that tells
	// a reader it holds a batch (taken > succeeded + failed) and which
	// one (each batch adds to taken). The outcomes are stored once the
	// batch is acknowledged (batchDone), so that a batch stays in flight
	// while an acknowledger runs.
	taken     stats.Counter
	succeeded stats.Counter
	failed    stats.FailureCounters
	busy      stats.Busy // time in the batch handler, estimated
	latency   *stats.Recorder
	// The outcomes of the batch being counted; owner only.
	batchOK     uint64
	batchFailed stats.Failures
}

type batcherStats struct {
	parts []*partShard
	procs []*procShard
	// unhandled counts the messages taken in that got no outcome once
	// every partition and batch processor returned; only Run writes it
	// (settle).
	unhandled *stats.Counter
	// calls dates the batches the batch processors hold, for the readers
	// (CallAges).
	calls *stats.Calls
	// dropped counts the messages a hard stop left behind whose outcome
	// was not the batcher's to report (see left). The partitions and
	// batch processors add to it on their way out, and Run once they
	// have returned: the hard stop's path alone, so an atomic add.
	dropped *atomic.Uint64
}

// newBatcherStats returns the shards of a batcher whose batch processors
// time one batch in every.
func newBatcherStats(partitions, processors int, every uint32) batcherStats {
	st := batcherStats{parts: make([]*partShard, partitions), procs: make([]*procShard, processors),
		unhandled: new(stats.Counter), dropped: new(atomic.Uint64), calls: stats.NewCalls(processors)}
	for i := range st.parts {
		st.parts[i] = &partShard{sizes: stats.NewSize()}
	}
	for i := range st.procs {
		st.procs[i] = &procShard{latency: stats.NewLatency(), busy: stats.NewBusy(every)}
	}
	return st
}

// A partition or batch processor built without counters (by a test)
// counts nothing: every hook accepts a nil shard.

// received counts n messages taken from the partition's queue.
func (sh *partShard) received(n int) {
	if sh != nil {
		sh.in.Add(uint64(n))
	}
}

// rejected counts a message failed on its way in.
func (sh *partShard) rejected(d acker.Disposition) {
	if sh != nil {
		sh.failed.Count(uint8(d))
	}
}

// emitted counts a batch of size messages emitted by trigger.
func (sh *partShard) emitted(trigger message.Trigger, size int) {
	if sh == nil {
		return
	}
	sh.batches[min(int(trigger), maxTriggers-1)].Add(1)
	sh.sizes.ObserveSize(size)
}

// took counts the n messages of the batch the batch processor takes up.
func (sh *procShard) took(n int) {
	if sh != nil {
		sh.taken.Add(uint64(n))
	}
}

// count counts the outcome of one message of a handled batch in the
// batch's tally, stored by batchDone (one atomic store per batch and
// outcome rather than per message).
func (sh *procShard) count(failed bool, d acker.Disposition) {
	switch {
	case sh == nil:
	case failed:
		sh.batchFailed.Count(uint8(d))
	default:
		sh.batchOK++
	}
}

// batchDone stores the outcomes of the batch just acknowledged.
func (sh *procShard) batchDone() {
	if sh == nil {
		return
	}
	if sh.batchOK > 0 {
		sh.succeeded.Add(sh.batchOK)
		sh.batchOK = 0
	}
	if sh.batchFailed.Total() > 0 {
		sh.failed.Store(sh.batchFailed)
		sh.batchFailed = stats.Failures{}
	}
}

// drop counts n messages a hard stop left behind whose outcome was not
// the batcher's to report.
func (st batcherStats) drop(n int) {
	if n > 0 && st.dropped != nil {
		st.dropped.Add(uint64(n))
	}
}

// settle counts, once every partition and batch processor has returned,
// the messages taken in that got no outcome: a hard stop (a drain cut
// short) left them unacknowledged, in open batches or in batches no batch
// processor handled; those it dropped are not among them. A complete
// drain leaves none. Only Run calls it.
func (st batcherStats) settle() {
	var done stats.Failures
	var succeeded, in uint64
	for _, sh := range st.procs {
		succeeded += sh.succeeded.Load()
		sh.failed.AddTo(&done)
	}
	for _, sh := range st.parts {
		sh.failed.AddTo(&done)
		in += sh.in.Load()
	}
	if out := succeeded + done.Total() + st.dropped.Load(); in > out {
		st.unhandled.Add(in - out)
	}
}

// callTimed calls the batch handler, timing it on one batch in
// sampleEvery(BatchSize) (the 1st, then every sampleEvery-th): the
// duration goes to the latency histogram and to the busy time, which
// estimates the batches in between from it (see stats.Busy).
func (bp *batchProcessor[T]) callTimed(ctx context.Context, b *message.Batch[T]) error {
	sh := bp.st
	if sh == nil {
		return bp.call(ctx, b)
	}
	start := sh.busy.Begin()
	if start.IsZero() {
		return bp.call(ctx, b)
	}
	err := bp.call(ctx, b)
	sh.latency.ObserveDuration(sh.busy.End(start))
	return err
}

// stopped completes the busy time once the batch processor has handled
// its last batch.
func (sh *procShard) stopped() {
	if sh != nil {
		sh.busy.Stop()
	}
}

// read returns batch processor i's successes and failures, and how long
// the batch it holds has been running at now (see stats.Calls). The
// outcomes are read before what it took, so that a batch ending meanwhile
// never shows more outcomes than messages.
func (st batcherStats) read(i int, now time.Time) (succeeded uint64, failed stats.Failures, age time.Duration) {
	sh := st.procs[i]
	succeeded = sh.succeeded.Load()
	sh.failed.AddTo(&failed)
	taken := sh.taken.Load()
	age = st.calls.Age(i, taken, taken > succeeded+failed.Total(), now)
	return succeeded, failed, age
}

// CallAges appends to ages, for each batch processor in turn, how long
// the batch it holds has been running at now: 0 when it holds none, or
// when no earlier reading (this one, or Stats) saw that batch. A batch is
// dated from the first reading that saw it, so an age is short by up to
// the time between two readings. Safe to call from any goroutine at any
// time.
func (s *Batcher[T]) CallAges(now time.Time, ages []time.Duration) []time.Duration {
	for i := range s.st.procs {
		_, _, age := s.st.read(i, now)
		ages = append(ages, age)
	}
	return ages
}

// Stats returns a snapshot of the batcher's counters; wall is the time
// since the pipeline started (0 before), for the busy ratio. Safe to call
// from any goroutine at any time.
func (s *Batcher[T]) Stats(wall time.Duration) stats.Batcher {
	now := time.Now()
	st := stats.Batcher{
		Name:          s.opts.Name,
		Stage:         s.name,
		Concurrency:   s.opts.Concurrency,
		Batches:       make(map[string]uint64),
		Queued:        s.input.Queued(),
		QueueCapacity: s.input.Partition(0).Cap() * s.input.Len(),
	}
	for _, q := range s.batches {
		st.QueuedBatches += q.Len()
		st.BatchQueueCapacity += q.Cap()
	}
	// Outcomes before what was taken in, so that InFlight is never
	// negative: a message is counted in before its outcome is.
	for i, sh := range s.st.procs {
		succeeded, failed, age := s.st.read(i, now)
		st.Succeeded += succeeded
		st.Failed.Add(failed)
		st.LongestCall = max(st.LongestCall, age)
		st.Busy += sh.busy.Load()
		sh.latency.AddTo(&st.Latency)
	}
	for _, sh := range s.st.parts {
		sh.failed.AddTo(&st.Failed)
	}
	st.Unhandled = s.st.unhandled.Load()
	st.Dropped = s.st.dropped.Load()
	// A partition takes messages in (In) before it emits their batches,
	// and counts a batch (Batches) before its size (Sizes): each read in
	// the other order, so that a reading never shows more sizes than
	// batches, nor more messages in batches than taken in.
	for _, sh := range s.st.parts {
		sh.sizes.AddTo(&st.Sizes)
		for i := range sh.batches {
			if n := sh.batches[i].Load(); n > 0 {
				st.Batches[message.Trigger(i).String()] += n
			}
		}
		st.In += sh.in.Load()
	}
	if done := st.Succeeded + st.Failed.Total() + st.Unhandled + st.Dropped; st.In > done {
		st.InFlight = int(st.In - done)
	}
	st.BusyRatio = stats.Ratio(st.Busy, st.Concurrency, wall)
	return st
}
