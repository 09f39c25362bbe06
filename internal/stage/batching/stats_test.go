package batching_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a batch processor times the batch handler on one batch in
// ⌈64/BatchSize⌉ (its 1st, then every ⌈64/BatchSize⌉-th; every batch from
// BatchSize 64 up): Latency holds exactly those durations. Busy estimates
// the batches in between from them, and never counts more than the time
// the batch processor ran: with every batch taking 1ms, it is the number
// of batches handled times 1ms, whatever the sampling.
func TestBatchHandlerTimedOnOneBatchInSixtyFourMessages(t *testing.T) {
	for _, tc := range []struct {
		size, msgs, batches, timed int
	}{
		{size: 1, msgs: 130, batches: 130, timed: 3}, // batches 1, 65, 129
		{size: 10, msgs: 100, batches: 10, timed: 2}, // batches 1, 8
		{size: 64, msgs: 192, batches: 3, timed: 3},  // every batch
		{size: 100, msgs: 250, batches: 3, timed: 3}, // 100, 100, and 50 flushed
	} {
		t.Run(fmt.Sprintf("BatchSize=%d", tc.size), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := acker.NewRecorder(false)
				began := time.Now()
				h := start(t, batcher.Options[int]{BatchSize: tc.size, BatchTimeout: never, Concurrency: 1,
					Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error {
						time.Sleep(time.Millisecond)
						return nil
					}})
				h.publish(t, msgs(rec, 0, tc.msgs, "")...)
				if got := len(h.drain(t)); got != tc.batches {
					t.Fatalf("%d batches handled, want %d", got, tc.batches)
				}
				ran := time.Since(began)
				st := h.s.Stats(ran)
				if st.Latency.Count != uint64(tc.timed) || st.Latency.Sum != float64(tc.timed)*1e-3 {
					t.Errorf("%d batch handler durations recorded summing to %vs, want %d of 1ms", st.Latency.Count, st.Latency.Sum, tc.timed)
				}
				if want := time.Duration(tc.batches) * time.Millisecond; st.Busy != want || st.Busy > ran {
					t.Errorf("busy %v after %d batches of 1ms in %v, want %v", st.Busy, tc.batches, ran, want)
				}
			})
		})
	}
}
