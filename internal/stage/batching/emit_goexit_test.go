package batching_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Guarantee: a BatchEmit hook that ends the batcher partition's goroutine
// (runtime.Goexit) on two emits in a row — the batch a heavy message's
// weight cuts short, then, from the goroutine that took over, that
// message's own batch, due at once since it reaches MaxWeight — neither
// ends the partition with a panic nor skips a message of the chunk: every
// message is batched and acknowledged once, without failing, each exit is
// logged, and the batcher drains.
func TestBatchEmitHookGoexitOnTwoEmitsInARowLosesNoMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"the heavy message ends its chunk", 3},
		{"messages follow the heavy one in its chunk", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var exits atomic.Int32
			hooks := &telemetry.Hooks{BatchEmit: func(context.Context, telemetry.Batch) {
				if exits.Add(1) <= 2 {
					runtime.Goexit()
				}
			}}
			log := &logtest.Lines{}
			s := batching.New(batcher.Options[int]{
				Name: "test", Concurrency: 1, BatchSize: 100, BatchTimeout: never, MaxWeight: 5,
				// Message 2 weighs MaxWeight: it cuts the batch of 0 and 1
				// short, and its own batch is due at once.
				Weight: func(m *message.Message[int]) int {
					if m.Data == 2 {
						return 5
					}
					return 1
				},
				Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
			}.WithDefaults(), batching.Config{Name: t.Name(), Logger: slog.New(slog.NewTextHandler(log, nil)), Hooks: hooks})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := stagetest.Go(ctx, s)
			rec := acker.NewRecorder(false)
			pctx, pcancel := context.WithTimeout(ctx, patience)
			defer pcancel()
			// One Publish: the partition takes the messages in as one
			// chunk.
			if k, err := s.Publish(pctx, msgs(rec, 0, tc.n, "k")); err != nil || k != tc.n {
				t.Fatalf("Publish took %d of %d messages: %v", k, tc.n, err)
			}
			// Batches [0 1] and [2] are handled once the partition has
			// taken the chunk in.
			if err := rec.Wait(pctx, 3); err != nil {
				t.Fatalf("%d outcomes recorded, want 3: %v", rec.Total(), err)
			}
			// Taken in after the exits: the partition still runs.
			if k, err := s.Publish(pctx, msgs(rec, 100, 3, "k")); err != nil || k != 3 {
				t.Fatalf("Publish took %d of 3 messages: %v", k, err)
			}
			s.CloseInput()
			waitDone(t, done, "the batcher to return")
			assertOnce(t, rec, append(span(0, tc.n), span(100, 103)...))
			if f := rec.Failed(); len(f) > 0 {
				t.Errorf("messages failed: %v, want none", outcomeIDs(f))
			}
			if lines := log.Matching(batching.PartitionExitedLog); len(lines) != 2 {
				t.Errorf("%d log lines %q, want 2 (one per exit)", len(lines), batching.PartitionExitedLog)
			}
		})
	}
}
