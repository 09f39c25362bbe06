package processing

import (
	"math"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/stats"
)

// Guarantee: counting a chunk (its messages in, a failure, its outcome and
// the sampled time) allocates nothing.
func TestShardCountingAllocatesNothing(t *testing.T) {
	sh := newPoolStats(1).shards[0]
	allocs := testing.AllocsPerRun(1000, func() {
		start := sh.begin(10)
		sh.fail(uint8(acker.DispositionRetry))
		sh.end(start)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per chunk, want 0", allocs)
	}
	if got := sh.in.Load(); got != 10*1001 {
		t.Errorf("in = %d, want %d", got, 10*1001)
	}
	if got := sh.succeeded.Load(); got != 9*1001 {
		t.Errorf("succeeded = %d, want %d", got, 9*1001)
	}
}

// BenchmarkShardChunk is what counting adds to one chunk of a processor:
// compare it with a chunk's time in the pipeline benchmarks (MaxDemand
// messages).
func BenchmarkShardChunk(b *testing.B) {
	sh := newPoolStats(1).shards[0]
	for b.Loop() {
		start := sh.begin(10)
		if sh.sample { // the handler sample of a timed chunk
			sh.sample = false
			t := time.Now()
			sh.latency.ObserveDuration(time.Since(t))
		}
		sh.end(start)
	}
}

// BenchmarkClock is one clock read and one elapsed time, the costly part
// of a timed chunk.
func BenchmarkClock(b *testing.B) {
	var d time.Duration
	for b.Loop() {
		d += time.Since(time.Now())
	}
	_ = d
}

// BenchmarkShardStores is the untimed part of counting a chunk.
func BenchmarkShardStores(b *testing.B) {
	sh := newPoolStats(1).shards[0]
	sh.busy = stats.NewBusy(math.MaxUint32)
	sh.end(sh.begin(10)) // the timed chunk; the next 2³²-2 are not
	for b.Loop() {
		sh.end(sh.begin(10))
	}
}
