package batching_test

import (
	"context"
	"fmt"
	"runtime"
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

// Guarantee: readings of a batcher's counters taken while it emits never
// show more batch sizes recorded than batches emitted, nor more messages
// in those batches than messages taken in. The readings run on the one
// processor the test leaves the runtime, so that the scheduler's
// preemption, which may stop a reading at any point, lets the batcher
// take in and emit in the middle of one.
func TestStatsNeverShowMoreBatchSizesThanBatchesOrMessagesIn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 5000
	h := start(t, batcher.Options[int]{BatchSize: 1, BatchTimeout: never, Concurrency: 1})
	rec := acker.NewRecorder(false)
	published := make(chan struct{})
	go func() {
		defer close(published)
		if taken, err := h.s.Publish(context.Background(), msgs(rec, 0, n, "")); taken != n {
			t.Errorf("Publish took %d of %d messages: %v", taken, n, err)
		}
	}()
	for st := h.s.Stats(0); st.Sizes.Count < n; st = h.s.Stats(0) {
		var batches uint64
		for _, b := range st.Batches {
			batches += b
		}
		if st.Sizes.Count > batches || st.Sizes.Sum > float64(st.In) {
			t.Fatalf("a reading shows %d batch sizes summing to %v messages, of %d batches and %d messages in",
				st.Sizes.Count, st.Sizes.Sum, batches, st.In)
		}
	}
	<-published
	h.drain(t)
}
