package batching_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
)

// discardAll is a failure hook that tries to discard every failed message.
func discardAll(hooked *int) func(context.Context, []*message.Message[int], message.BatchInfo) {
	return func(_ context.Context, failed []*message.Message[int], _ message.BatchInfo) {
		for _, m := range failed {
			*hooked++
			m.SetDisposition(acker.DispositionDiscard)
		}
	}
}

// Guarantee: a batch handler that fails with its context's error once the
// hard stop cancelled it (whole batch, or one message with m.Fail) yields
// interrupted outcomes (ErrShutdown wrapping context.Canceled, retry) after
// the failure hook ran, whatever the hook set.
func TestBatchCancelledByHardStopIsRetried(t *testing.T) {
	for _, perMessage := range []bool{false, true} {
		t.Run(fmt.Sprintf("perMessage=%v", perMessage), func(t *testing.T) {
			rec := acker.NewRecorder(false)
			inHandler := make(chan struct{})
			hooked := 0
			h := start(t, batcher.Options[int]{
				BatchSize: 2, BatchTimeout: never,
				Handle: func(ctx context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
					close(inHandler)
					<-ctx.Done()
					if perMessage {
						batch[0].Fail(fmt.Errorf("write: %w", ctx.Err()))
						return nil
					}
					return fmt.Errorf("write: %w", ctx.Err())
				},
				HandleFailed: discardAll(&hooked),
			})
			h.publish(t, msgs(rec, 1, 2, "")...)
			waitDone(t, inHandler, "the batch handler to start")
			h.cancel()
			waitDone(t, stagetest.Done(h.s), "the batcher to return")
			wantFailed := 2
			if perMessage {
				wantFailed = 1
			}
			if rec.FailedCount() != wantFailed || hooked != wantFailed {
				t.Fatalf("%d failed, hook saw %d; want %d of each", rec.FailedCount(), hooked, wantFailed)
			}
			for _, o := range rec.Failed() {
				if !acker.Interrupted(o) || !errors.Is(o.Err, context.Canceled) || o.Disposition != acker.DispositionRetry {
					t.Fatalf("outcome %d: error %v disposition %v; want ErrShutdown wrapping context.Canceled, retry", o.ID, o.Err, o.Disposition)
				}
			}
		})
	}
}

// Guarantee: a batch handler's own context error while the batcher runs is
// an ordinary failure: the hook's disposition applies.
func TestBatchOwnDeadlineIsOrdinaryFailure(t *testing.T) {
	rec := acker.NewRecorder(false)
	hooked := 0
	h := start(t, batcher.Options[int]{
		BatchSize: 1,
		Handle: func(ctx context.Context, _ []*message.Message[int], _ message.BatchInfo) error {
			own, cancel := context.WithTimeout(ctx, time.Nanosecond)
			defer cancel()
			<-own.Done()
			return own.Err()
		},
		HandleFailed: discardAll(&hooked),
	})
	h.publish(t, msg(rec, 1, ""))
	h.drain(t)
	o := rec.Failed()[0]
	if acker.Interrupted(o) || !errors.Is(o.Err, context.DeadlineExceeded) || o.Disposition != acker.DispositionDiscard {
		t.Fatalf("outcome error %v disposition %v; want an ordinary DeadlineExceeded, discarded by the hook", o.Err, o.Disposition)
	}
}

// Guarantee: Running names the batcher partition and the batch processor
// while a batch handler is stuck past the hard stop, and none once they
// returned.
func TestRunningNamesStuckBatchProcessor(t *testing.T) {
	rec := acker.NewRecorder(false)
	inHandler := make(chan struct{})
	release := make(chan struct{})
	h := start(t, batcher.Options[int]{
		BatchSize: 1, Concurrency: 2,
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error {
			close(inHandler)
			<-release // ignores its context
			return nil
		},
	})
	h.publish(t, msg(rec, 1, ""))
	waitDone(t, inHandler, "the batch handler to start")
	h.cancel()
	// The partition and the idle batch processor return on the hard stop;
	// the stuck one cannot.
	deadline := time.Now().Add(patience)
	for {
		parts, procs := h.s.Running()
		if len(parts) == 0 && len(procs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Running() = %v, %v; want no partition and the stuck batch processor", parts, procs)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	waitDone(t, stagetest.Done(h.s), "the batcher to return")
	if parts, procs := h.s.Running(); len(parts)+len(procs) != 0 {
		t.Fatalf("Running() = %v, %v after the batcher returned", parts, procs)
	}
	// The handler did handle the batch: its outcome is reported.
	if got := outcomeIDs(rec.Successful()); !slices.Equal(got, []int{1}) {
		t.Fatalf("successful %v, want [1]", got)
	}
}

// Guarantee: a partitioned batcher at ConcurrencyLimit partitions
// reserves little memory up front, whether its batches are the largest
// (BatchSizeLimit) or the smallest (1, whose batch queues are lengthened
// for small batches): its queues are bounded as a whole, and batches grow
// as messages arrive.
func TestBoundOptionsReserveLittle(t *testing.T) {
	for _, size := range []int{batcher.BatchSizeLimit, 1} {
		t.Run(fmt.Sprint("batch size ", size), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s := batching.New(batcher.Options[int]{
				Name: "bound", BatchSize: size, BatchTimeout: time.Second, Concurrency: batcher.ConcurrencyLimit,
				MaxDemand:   batcher.DefaultMaxDemand,
				PartitionBy: func(*message.Message[int]) string { return "" },
				Handle:      func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
			}, batching.Config{Name: "p"})
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(s)
			if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
				t.Fatalf("building the batcher allocated %d MiB, want at most 64", got>>20)
			}
		})
	}
}
