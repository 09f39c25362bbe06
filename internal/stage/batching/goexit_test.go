package batching_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// goexitRun runs a batcher with one batch processor, batches of 5, whose
// user code ends its goroutine (runtime.Goexit) on the batch holding
// message 3: 20 messages, then 10 more once the first have their outcomes.
// It checks that each of the 30 reaches its acknowledger once, that the
// failed ones are those of that batch, with message.ErrHandlerExited, that
// the later ones were handled by the batch processor that took over, that
// the exit was logged once, and that the batcher drains.
func goexitRun(t *testing.T, opts batcher.Options[int]) {
	t.Helper()
	log := &logtest.Records{}
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
		t.Errorf("batch processors running after the exit: %v, want the one configured", procs)
	}
	send(20, 10)
	s.CloseInput()
	waitDone(t, done, "the batcher to return")
	stagetest.ExpectAckedOnce(t, rec, 30)
	failed := map[uint64]bool{}
	for _, o := range rec.Failed() {
		failed[o.ID] = true
		if !errors.Is(o.Err, message.ErrHandlerExited) && !errors.Is(o.Err, errRefused) {
			t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
		}
	}
	for id := range uint64(30) {
		if want := id < 5; failed[id] != want {
			t.Errorf("message %d failed: %t, want %t (only the batch user code exited in fails)", id, failed[id], want)
		}
	}
	if n := log.Count(slog.LevelError, batching.ExitedLog); n != 1 {
		t.Errorf("%d log lines %q, want 1", n, batching.ExitedLog)
	}
	st := s.Stats(0)
	if st.In != 30 || st.Succeeded != 25 || st.Failed.Total() != 5 {
		t.Errorf("Stats: In %d, Succeeded %d, Failed %d; want 30, 25, 5", st.In, st.Succeeded, st.Failed.Total())
	}
}

// errRefused is a batch handler's own failure.
var errRefused = errors.New("refused")

// exitsOn3 is a batch handler that ends its goroutine on the batch that
// holds message 3.
func exitsOn3(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
	for _, m := range batch {
		if m.Data == 3 {
			runtime.Goexit()
		}
	}
	return nil
}

// Guarantee: a batch handler that ends its goroutine (runtime.Goexit, as
// t.FailNow does) fails its batch with message.ErrHandlerExited, each
// message reported once, logs it once, and another batch processor takes
// over, so that the batcher keeps its concurrency and drains.
func TestBatchHandlerGoexitFailsBatchAndABatchProcessorTakesOver(t *testing.T) {
	goexitRun(t, batcher.Options[int]{Handle: exitsOn3})
}

// Guarantee: HandleFailed ending its goroutine still has the batch's
// messages reported once, and another batch processor takes over.
func TestBatchHandleFailedGoexitReportsBatchAndABatchProcessorTakesOver(t *testing.T) {
	goexitRun(t, batcher.Options[int]{
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			for _, m := range batch {
				if m.Data == 3 {
					return errRefused
				}
			}
			return nil
		},
		HandleFailed: func(context.Context, []*message.Message[int], message.BatchInfo) { runtime.Goexit() },
	})
}

// runBatchesOfFive runs, until the test ends, a batcher of cfg with one
// batch processor whose handler succeeds on batches of 5, and returns it,
// the context it runs in and what stagetest.Go returns.
func runBatchesOfFive(t *testing.T, cfg batching.Config) (*batching.Batcher[int], context.Context, <-chan struct{}) {
	opts := batcher.Options[int]{Name: "test", BatchSize: 5, Concurrency: 1, BatchTimeout: never,
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }}
	s := batching.New(opts.WithDefaults(), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return s, ctx, stagetest.Go(ctx, s)
}

// Guarantee: a telemetry hook that ends the batch processor's goroutine
// (here BatchStart, before the batch handler runs) fails that batch with
// message.ErrHandlerExited, each message reported once, and another batch
// processor takes over with the batches it had taken.
func TestBatchHookGoexitFailsBatchAndABatchProcessorTakesOver(t *testing.T) {
	exit := stagetest.GoexitOnce()
	hooks := &telemetry.Hooks{
		BatchStart: func(context.Context, telemetry.Batch) { exit() },
		BatchStop:  func(context.Context, telemetry.Batch) {},
	}
	s, ctx, done := runBatchesOfFive(t, batching.Config{Name: t.Name(), Hooks: hooks})
	rec := acker.NewRecorder(false)
	msgs := make([]*message.Message[int], 20)
	for i := range msgs {
		msgs[i] = message.New(i, rec, uint64(i))
	}
	if n, err := s.Publish(ctx, msgs); err != nil || n != len(msgs) {
		t.Fatalf("Publish took %d of %d messages: %v", n, len(msgs), err)
	}
	wctx, wcancel := context.WithTimeout(ctx, patience)
	defer wcancel()
	if err := rec.Wait(wctx, len(msgs)); err != nil {
		t.Fatalf("%d outcomes recorded, want %d: %v", rec.Total(), len(msgs), err)
	}
	s.CloseInput()
	waitDone(t, done, "the batcher to return")
	stagetest.ExpectAckedOnce(t, rec, 20)
	stagetest.ExpectOnlyFirstExited(t, rec, 5, "batch")
	if n := rec.FailedCount(); n != 5 {
		t.Errorf("%d messages failed, want the first batch's 5", n)
	}
}

// Guarantee: an acknowledger that ends the batch processor's goroutine
// (runtime.Goexit) while the batch is reported leaves that batch's
// messages unacknowledged, and still counted by the outcomes they were
// given: In = Succeeded once the batcher has drained, none in flight and
// none unhandled.
func TestBatchAcknowledgerGoexitCountsTheBatchItHeld(t *testing.T) {
	s, ctx, done := runBatchesOfFive(t, batching.Config{Name: t.Name(), Logger: slog.New(slog.DiscardHandler)})
	rec := acker.NewRecorder(false)
	msgs := make([]*message.Message[int], 20)
	for i := range msgs {
		var ack acker.Acknowledger = rec
		if i >= 15 { // the last batch
			ack = exitingAcker{}
		}
		msgs[i] = message.New(i, ack, uint64(i))
	}
	if n, err := s.Publish(ctx, msgs); err != nil || n != len(msgs) {
		t.Fatalf("Publish took %d of %d messages: %v", n, len(msgs), err)
	}
	wctx, wcancel := context.WithTimeout(ctx, patience)
	defer wcancel()
	if err := rec.Wait(wctx, 15); err != nil {
		t.Fatalf("%d outcomes recorded, want the 15 of the batches before the exit: %v", rec.Total(), err)
	}
	s.CloseInput()
	waitDone(t, done, "the batcher to return")
	if st := s.Stats(0); st.In != 20 || st.Succeeded != 20 || st.Unhandled != 0 || st.InFlight != 0 {
		t.Errorf("Stats: In %d, Succeeded %d, Unhandled %d, InFlight %d; want 20, 20, 0, 0", st.In, st.Succeeded, st.Unhandled, st.InFlight)
	}
}

// Guarantee: a batch handler that ends its goroutine (runtime.Goexit) fails
// every message of its batch with message.ErrHandlerExited, as a panic
// fails them all with its *message.PanicError: a failure the handler set on
// one of them before it exited does not survive.
func TestBatchHandlerGoexitFailsEveryMessageOfItsBatchWithErrHandlerExited(t *testing.T) {
	rec := runBatches(t, batcher.Options[int]{
		Handle: func(ctx context.Context, batch []*message.Message[int], info message.BatchInfo) error {
			for _, m := range batch {
				if m.Data == 1 {
					m.Fail(errRefused)
				}
			}
			return exitsOn3(ctx, batch, info)
		},
	}, &logtest.Records{})
	if n := rec.FailedCount(); n != 5 {
		t.Errorf("%d messages failed, want the first batch's 5", n)
	}
	for _, o := range rec.Failed() {
		if !errors.Is(o.Err, message.ErrHandlerExited) {
			t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
		}
	}
}
