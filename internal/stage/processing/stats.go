package processing

import (
	"context"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/internal/stats"
	"github.com/boulevard-go/boulevard/message"
)

// sampleEvery is how often a processor reads the clock: it times one chunk
// in sampleEvery (the 1st, the 65th, …) for the busy time (see
// stats.Busy), and times the handler on that chunk's first message.
// Reading the clock costs more than the rest of the counting together (up
// to 100ns on a virtual machine), so timing every chunk would cost a cheap
// handler several percent of its throughput.
const sampleEvery = 64

// shard is one processor's counters: only that processor's goroutine
// writes them, twice per chunk (and once more per disposition of its
// failures, when some failed), so that counting adds no contention and no
// allocation to the hot path. An atomic store is a locked instruction on
// amd64, so a chunk stores only what it must: what it took in when it
// starts, its outcomes once it has ended (acknowledged and handed on); in
// flight is derived, and a chunk stays in flight, for LongestCall, until
// its acknowledgers have returned.
type shard struct {
	_         [64]byte // keeps the counters off the previous allocation's cache line
	in        stats.Counter
	succeeded stats.Counter
	unhandled stats.Counter
	busy      stats.Busy
	failed    stats.FailureCounters
	latency   *stats.Recorder

	// Owned by the processor goroutine, not read by Stats. chunkLeft
	// counts the chunk's messages a hard stop left without an outcome:
	// those the handler did not see, and those a batcher did not take;
	// chunkFailed tallies its failures by disposition, stored by end.
	chunkIn     uint64
	chunkFailed stats.Failures
	chunkLeft   uint64
	sample      bool
}

// poolStats are the shards of a pool's processors.
type poolStats struct {
	shards []*shard
	// left counts the messages a hard stop left in the processors'
	// queues, taken in and unhandled; only Run writes it (leftQueued),
	// once every processor has returned.
	left *stats.Counter
	// calls dates the chunks in flight for the readers (CallAges): a
	// processor's in counter names its chunk, since each chunk adds to it.
	calls *stats.Calls
	// early counts the messages failed before any processor took them
	// (FailExited): taken in and failed at once.
	early *earlyFailures
}

// earlyFailures tallies the messages failed on their way to the
// processors. Only a goroutine that user code ended adds to it, so a
// mutex costs nothing on the hot path.
type earlyFailures struct {
	mu     sync.Mutex
	failed stats.Failures
}

// exited counts failed, messages failed on their way in, as taken in and
// failed.
func (st poolStats) exited(failed stats.Failures) {
	if failed.Total() == 0 {
		return
	}
	st.early.mu.Lock()
	st.early.failed.Add(failed)
	st.early.mu.Unlock()
}

// earlyFailed returns the tally of the messages failed on their way in.
func (st poolStats) earlyFailed() stats.Failures {
	st.early.mu.Lock()
	defer st.early.mu.Unlock()
	return st.early.failed
}

func newPoolStats(processors int) poolStats {
	st := poolStats{shards: make([]*shard, processors), left: new(stats.Counter), calls: stats.NewCalls(processors), early: new(earlyFailures)}
	for i := range st.shards {
		st.shards[i] = &shard{latency: stats.NewLatency(), busy: stats.NewBusy(sampleEvery)}
	}
	return st
}

// begin counts a chunk of n messages taken in and returns when it started
// when the chunk is timed (the zero time when it is not).
func (sh *shard) begin(n int) time.Time {
	sh.in.Add(uint64(n))
	sh.chunkIn = uint64(n)
	start := sh.busy.Begin()
	if !start.IsZero() {
		sh.sample = true
	}
	return start
}

// end counts the chunk's outcomes and the time it took. Deferred by
// handleChunk, so it runs once the chunk's messages are acknowledged or
// handed to their batchers: until then the chunk is in flight.
func (sh *shard) end(start time.Time) {
	sh.busy.End(start)
	if sh.chunkLeft > 0 {
		sh.unhandled.Add(sh.chunkLeft)
	}
	failed := sh.chunkFailed.Total()
	sh.succeeded.Add(sh.chunkIn - failed - sh.chunkLeft)
	if failed > 0 {
		sh.failed.Store(sh.chunkFailed)
		sh.chunkFailed = stats.Failures{}
	}
	sh.chunkLeft = 0
}

// leftQueued counts n messages a hard stop left in the processors'
// queues: taken in, to stay unhandled, so that In = Succeeded + Failed +
// Unhandled once the processors have stopped.
func (st poolStats) leftQueued(n int) {
	st.left.Add(uint64(n))
}

// fail counts a failed message by the disposition it is acknowledged
// with, in the chunk's tally that end stores.
func (sh *shard) fail(d uint8) {
	sh.chunkFailed.Count(d)
}

// handleTimed calls the handler, timing it on the first message of a timed
// chunk.
func (p *worker[In, Out]) handleTimed(ctx context.Context, m *message.Message[In]) (Out, error) {
	if !p.st.sample {
		return p.handle(ctx, m)
	}
	p.st.sample = false
	start := time.Now()
	out, err := p.handle(ctx, m)
	p.st.latency.ObserveDuration(time.Since(start))
	return out, err
}

// read returns processor i's counters: its outcomes, read before what it
// took in, so that a chunk ending meanwhile never shows more outcomes than
// messages; and how long the chunk it holds has been running at now (see
// stats.Calls).
func (st poolStats) read(i int, now time.Time) (succeeded, unhandled, in uint64, failed stats.Failures, age time.Duration) {
	sh := st.shards[i]
	sh.failed.AddTo(&failed)
	succeeded, unhandled = sh.succeeded.Load(), sh.unhandled.Load()
	in = sh.in.Load()
	// Each chunk adds to in, so in names the chunk in flight.
	age = st.calls.Age(i, in, in > succeeded+unhandled+failed.Total(), now)
	return succeeded, unhandled, in, failed, age
}

// CallAges appends to ages, for each processor in turn, how long the chunk
// it holds has been running at now: 0 when it holds none, or when no
// earlier reading (this one, or Stats) saw that chunk. A chunk is dated
// from the first reading that saw it, so an age is short by up to the
// time between two readings. Safe to call from any goroutine at any time.
func (s *Pool[In, Out]) CallAges(now time.Time, ages []time.Duration) []time.Duration {
	for i := range s.st.shards {
		_, _, _, _, age := s.st.read(i, now)
		ages = append(ages, age)
	}
	return ages
}

// Stats returns a snapshot of the processors' counters; wall is the time
// since the pipeline started (0 before), for the busy ratio. Safe to call
// from any goroutine at any time.
func (s *Pool[In, Out]) Stats(wall time.Duration) stats.Processors {
	now := time.Now()
	left := s.st.left.Load()
	early := s.st.earlyFailed()
	st := stats.Processors{
		Stage:         s.name,
		Concurrency:   s.opts.Concurrency,
		Running:       len(s.Running()),
		In:            left + early.Total(),
		Unhandled:     left,
		Failed:        early,
		Queued:        s.input.Queued(),
		QueueCapacity: s.QueueCapacity() * s.input.Len(),
	}
	for i, sh := range s.st.shards {
		succeeded, unhandled, in, failed, age := s.st.read(i, now)
		st.LongestCall = max(st.LongestCall, age)
		st.Failed.Add(failed)
		st.Succeeded += succeeded
		st.Unhandled += unhandled
		st.In += in
		st.InFlight += int(in - succeeded - unhandled - failed.Total())
		st.Busy += sh.busy.Load()
		sh.latency.AddTo(&st.Latency)
	}
	if st.Latency.Bounds == nil {
		stats.NewLatency().AddTo(&st.Latency)
	}
	st.BusyRatio = stats.Ratio(st.Busy, st.Concurrency, wall)
	return st
}
