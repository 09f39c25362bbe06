package batching_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
)

// handleFailedPanicLog is what a batch processor logs when HandleFailed
// panics.
const handleFailedPanicLog = "HandleFailed panicked; acknowledging the messages as they were"

// runBatches runs a batcher with one batch processor and batches of 5 on
// opts, publishes 20 messages, then 10 more once the first have their
// outcomes, drains it and checks that each of the 30 was acknowledged
// once and that a batch processor still ran after the first 20.
func runBatches(t *testing.T, opts batcher.Options[int], log *logtest.Records) *acker.Recorder {
	t.Helper()
	opts.Name, opts.BatchSize, opts.Concurrency, opts.BatchTimeout = "test", 5, 1, never
	s := batching.New(opts.WithDefaults(), batching.Config{Name: t.Name(), Logger: slog.New(log)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := stagetest.Go(ctx, s)
	rec := acker.NewRecorder(false)
	send := func(from, n int) {
		msgs := make([]*message.Message[int], n)
		for i := range msgs {
			msgs[i] = message.New(from+i, rec, uint64(from+i))
		}
		pctx, pcancel := context.WithTimeout(ctx, patience)
		defer pcancel()
		if k, err := s.Publish(pctx, msgs); err != nil || k != n {
			t.Fatalf("Publish took %d of %d messages: %v", k, n, err)
		}
		if err := rec.Wait(pctx, from+n); err != nil {
			t.Fatalf("%d outcomes recorded, want %d: %v", rec.Total(), from+n, err)
		}
	}
	send(0, 20)
	if _, procs := s.Running(); len(procs) != 1 {
		t.Errorf("batch processors running: %v, want the one configured", procs)
	}
	send(20, 10)
	s.CloseInput()
	waitDone(t, done, "the batcher to return")
	stagetest.ExpectAckedOnce(t, rec, 30)
	return rec
}

// Guarantee: the messages of a batch whose handler ended its goroutine
// (runtime.Goexit) go through HandleFailed before they are acknowledged,
// as those of a batch handler that panics do (Broadway calls
// handle_failed for messages that failed because handle_batch raised):
// HandleFailed sees the whole batch, what it sets (here the disposition)
// is what the acknowledger gets, each message is acknowledged once, and
// another batch processor takes over.
func TestBatchHandleFailedSeesTheBatchAHandlerExitFailed(t *testing.T) {
	for _, c := range []string{"panics", "exits"} {
		t.Run(c, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[uint64]bool{}
			rec := runBatches(t, batcher.Options[int]{
				Handle: func(ctx context.Context, batch []*message.Message[int], info message.BatchInfo) error {
					for _, m := range batch {
						if m.Data == 3 && c == "panics" {
							panic("message 3")
						}
					}
					return exitsOn3(ctx, batch, info)
				},
				HandleFailed: func(_ context.Context, failed []*message.Message[int], _ message.BatchInfo) {
					mu.Lock()
					defer mu.Unlock()
					for _, m := range failed {
						seen[uint64(m.Data)] = true
						m.SetDisposition(acker.DispositionDiscard)
					}
				},
			}, &logtest.Records{})
			mu.Lock()
			defer mu.Unlock()
			if n := rec.FailedCount(); n != 5 {
				t.Errorf("%d messages failed, want the first batch's 5", n)
			}
			for _, o := range rec.Failed() {
				if !seen[o.ID] {
					t.Errorf("message %d failed (%v) without HandleFailed seeing it", o.ID, o.Err)
				}
				if o.Disposition != acker.DispositionDiscard {
					t.Errorf("message %d acknowledged with disposition %v, want the %v HandleFailed set", o.ID, o.Disposition, acker.DispositionDiscard)
				}
				if c == "exits" && !errors.Is(o.Err, message.ErrHandlerExited) {
					t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
				}
			}
		})
	}
}

// Guarantee: a HandleFailed called for the batch of a handler that ended
// its goroutine (runtime.Goexit) may itself panic or end its goroutine:
// every message of the batch is still acknowledged once, as failed with
// message.ErrHandlerExited; each event is logged once (the handler's
// exit, then HandleFailed's panic or exit); and another batch processor
// takes over and handles later batches.
func TestBatchHandleFailedPanicOrGoexitAfterAHandlerExitKeepsEveryOutcome(t *testing.T) {
	for _, c := range []string{"panics", "exits"} {
		t.Run(c, func(t *testing.T) {
			log := &logtest.Records{}
			exit := stagetest.GoexitOnce()
			rec := runBatches(t, batcher.Options[int]{
				Handle: exitsOn3,
				HandleFailed: func(context.Context, []*message.Message[int], message.BatchInfo) {
					if c == "panics" {
						panic("HandleFailed")
					}
					exit()
				},
			}, log)
			stagetest.ExpectOnlyFirstExited(t, rec, 5, "batch")
			if n := rec.FailedCount(); n != 5 {
				t.Errorf("%d messages failed, want the first batch's 5", n)
			}
			wantExits, wantPanics := 1, 1
			if c == "exits" {
				wantExits, wantPanics = 2, 0
			}
			if n := log.Count(slog.LevelError, batching.ExitedLog); n != wantExits {
				t.Errorf("%d log lines %q, want %d", n, batching.ExitedLog, wantExits)
			}
			if n := log.Count(slog.LevelError, handleFailedPanicLog); n != wantPanics {
				t.Errorf("%d log lines %q, want %d", n, handleFailedPanicLog, wantPanics)
			}
		})
	}
}
