package batching_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
)

// Guarantee: a batch processor times the batch handler on one batch in
// ⌈64/BatchSize⌉ (its 1st, then every ⌈64/BatchSize⌉-th; every batch from
// BatchSize 64 up): Latency holds exactly those durations, and Busy counts
// each of them ⌈64/BatchSize⌉ times.
func TestBatchHandlerTimedOnOneBatchInSixtyFourMessages(t *testing.T) {
	for _, tc := range []struct {
		size, msgs, batches, timed, every int
	}{
		{size: 1, msgs: 130, batches: 130, timed: 3, every: 64}, // batches 1, 65, 129
		{size: 10, msgs: 100, batches: 10, timed: 2, every: 7},  // batches 1, 8
		{size: 64, msgs: 192, batches: 3, timed: 3, every: 1},   // every batch
		{size: 100, msgs: 250, batches: 3, timed: 3, every: 1},  // 100, 100, and 50 flushed
	} {
		t.Run(fmt.Sprintf("BatchSize=%d", tc.size), func(t *testing.T) {
			rec := acker.NewRecorder(false)
			h := start(t, batcher.Options[int]{BatchSize: tc.size, BatchTimeout: never, Concurrency: 1})
			h.publish(t, msgs(rec, 0, tc.msgs, "")...)
			if got := len(h.drain(t)); got != tc.batches {
				t.Fatalf("%d batches handled, want %d", got, tc.batches)
			}
			st := h.s.Stats(time.Second)
			if st.Latency.Count != uint64(tc.timed) {
				t.Errorf("%d batch handler durations recorded, want %d", st.Latency.Count, tc.timed)
			}
			if st.Busy <= 0 {
				t.Fatalf("busy %v, want > 0", st.Busy)
			}
			// Busy is every timed duration counted every times: equal to
			// every × the latencies' sum, up to the sum's float rounding.
			want := float64(tc.every) * st.Latency.Sum * 1e9
			if math.Abs(float64(st.Busy)-want) > float64(tc.every) {
				t.Errorf("busy %v, want %d × the timed durations' sum %v", st.Busy, tc.every, time.Duration(st.Latency.Sum*1e9))
			}
		})
	}
}
