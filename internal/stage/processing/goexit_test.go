package processing_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// goexitRun runs a processor stage of one processor, whose user code (the
// handler, or Prepare) calls runtime.Goexit on message 3, with 30 messages
// in chunks of 10 at most, and then 10 more once the first have their
// outcomes; it checks that each of the 40 reaches its acknowledger once,
// that those that failed failed with message.ErrHandlerExited (message 3
// among them), that the 10 later ones were handled by the processor that
// took over, that the exit was logged once, and that the stage drains.
func goexitRun(t *testing.T, opts processor.Options[int, int], routes ...processing.NamedRoute[int]) {
	t.Helper()
	log := &logtest.Records{}
	opts.Concurrency, opts.MaxDemand = 1, 10
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(log), Routes: routes})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := stagetest.Go(ctx, s)
	rec := acker.NewRecorder(false)
	publish(t, s, ints(rec, 0, 30))
	waitAcks(t, rec, 30)
	if got := s.Running(); len(got) != 1 {
		t.Errorf("processors running after the exit: %v, want the one configured", got)
	}
	publish(t, s, ints(rec, 30, 10))
	waitAcks(t, rec, 40)
	s.CloseInput()
	waitDone(t, done, "the processors to return")
	assertOnce(t, rec, seq(0, 40))
	exited3 := false
	for _, o := range rec.Failed() {
		if !errors.Is(o.Err, message.ErrHandlerExited) && !errors.Is(o.Err, errRefused) {
			t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
		}
		if o.ID >= 30 {
			t.Errorf("message %d, published after the exit, failed: %v", o.ID, o.Err)
		}
		exited3 = exited3 || o.ID == 3
	}
	if !exited3 {
		t.Error("message 3, whose user code exited its goroutine, did not fail")
	}
	if n := log.Count(slog.LevelError, processing.ExitedLog); n != 1 {
		t.Errorf("%d log lines %q, want 1", n, processing.ExitedLog)
	}
	st := s.Stats(0)
	if st.In != 40 || st.Succeeded+st.Failed.Total() != 40 || st.Failed.Total() != uint64(rec.FailedCount()) {
		t.Errorf("Stats: In %d, Succeeded %d, Failed %d; want 40 in, %d failed", st.In, st.Succeeded, st.Failed.Total(), rec.FailedCount())
	}
}

// Guarantee: a handler that ends its goroutine (runtime.Goexit, as
// t.FailNow does) fails the messages its processor held with
// message.ErrHandlerExited, each reported once, logs it once, and another
// processor takes over, so that the stage keeps its concurrency and drains.
func TestHandlerGoexitFailsHeldMessagesAndAProcessorTakesOver(t *testing.T) {
	goexitRun(t, processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
		if m.Data == 3 {
			runtime.Goexit()
		}
		return m.Data, nil
	}})
}

// Guarantee: the same holds when the processor routes to a batcher: the
// messages of the chunk the handler exited in fail and are acknowledged
// by the processor, none of them goes on to the batcher.
func TestHandlerGoexitWithBatcherFailsHeldMessages(t *testing.T) {
	r := &fakeRoute[int]{}
	goexitRun(t, processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
		if m.Data == 3 {
			runtime.Goexit()
		}
		return m.Data, nil
	}}, processing.NamedRoute[int]{Name: message.DefaultBatcher, Route: ackingRoute{r}})
}

// Guarantee: Prepare ending its goroutine fails its whole chunk with
// message.ErrHandlerExited, and another processor takes over.
func TestPrepareGoexitFailsChunkAndAProcessorTakesOver(t *testing.T) {
	goexitRun(t, processor.Options[int, int]{
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			for _, m := range msgs {
				if m.Data == 3 {
					runtime.Goexit()
				}
			}
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
	})
}

// Guarantee: HandleFailed ending its goroutine still has the chunk's
// failed messages reported once, and another processor takes over.
func TestHandleFailedGoexitReportsChunkAndAProcessorTakesOver(t *testing.T) {
	goexitRun(t, processor.Options[int, int]{
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 3 {
				return 0, errRefused
			}
			return m.Data, nil
		},
		HandleFailed: func(context.Context, []*message.Message[int]) { runtime.Goexit() },
	})
}

// errRefused is a handler's own failure.
var errRefused = errors.New("refused")

// ackingRoute is a batcher that acknowledges every message it takes.
type ackingRoute struct{ r *fakeRoute[int] }

func (a ackingRoute) Publish(ctx context.Context, msgs []*message.Message[int]) (int, error) {
	var g acker.Group
	for _, m := range msgs {
		m.AddTo(&g)
	}
	g.Flush(ctx, nil)
	return a.r.Publish(ctx, msgs)
}

// Guarantee: a telemetry hook that ends the processor's goroutine (here
// ChunkStart, before any handler of the chunk runs) fails the messages of
// that chunk with message.ErrHandlerExited, each reported once, and
// another processor takes over.
func TestChunkHookGoexitFailsChunkAndAProcessorTakesOver(t *testing.T) {
	exit := stagetest.GoexitOnce()
	hooks := &telemetry.Hooks{
		ChunkStart: func(context.Context, telemetry.Chunk) { exit() },
		ChunkStop:  func(context.Context, telemetry.Chunk) {},
	}
	opts := processor.Options[int, int]{Concurrency: 1, MaxDemand: 10,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Hooks: hooks})
	run(t, s)
	rec := acker.NewRecorder(false)
	publish(t, s, ints(rec, 0, 10))
	waitAcks(t, rec, 10)
	publish(t, s, ints(rec, 10, 10))
	waitAcks(t, rec, 20)
	drain(t, s)
	assertOnce(t, rec, seq(0, 20))
	stagetest.ExpectOnlyFirstExited(t, rec, 10, "chunk")
	if !slices.Contains(ids(rec.Failed()), 0) {
		t.Error("message 0, of the chunk whose hook exited, did not fail")
	}
}
