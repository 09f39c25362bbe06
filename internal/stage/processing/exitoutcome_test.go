package processing_test

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: when a handler ends its goroutine (runtime.Goexit), a message
// of the same chunk that the handler deferred (message.Defer) is left to
// its deferrer, who reports its one outcome: the processor fails the
// others, not it, HandleFailed does not see it, and the stage counts it
// as a success.
func TestHandlerGoexitLeavesADeferredMessageToItsDeferrer(t *testing.T) {
	rec := acker.NewRecorder(false)
	var seen []int // written by the processor only, read once it returned
	opts := processor.Options[int, int]{Concurrency: 1, MaxDemand: 10,
		HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
			for _, m := range failed {
				seen = append(seen, m.Data)
			}
		},
		Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			switch m.Data {
			case 0:
				m.Defer()
				ack, _, _ := m.Acknowledger()
				ack.Ack(ctx, []acker.Outcome{m.Outcome()}, nil)
			case 1:
				runtime.Goexit()
			}
			return m.Data, nil
		}}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(&logtest.Records{})})
	publish(t, s, ints(rec, 0, 10)) // one chunk: queued before the processor starts
	run(t, s)
	waitAcks(t, rec, 10)
	drain(t, s)
	assertOnce(t, rec, seq(0, 10))
	for _, o := range rec.Failed() {
		if o.ID == 0 {
			t.Errorf("deferred message 0 failed: %v", o.Err)
		}
	}
	if slices.Contains(seen, 0) || len(seen) != 9 {
		t.Errorf("HandleFailed saw %v, want messages 1 to 9 and not the deferred 0", seen)
	}
	if st := s.Stats(0); st.Succeeded != 1 || st.Failed.Total() != 9 {
		t.Errorf("Stats: Succeeded %d, Failed %d; want 1 and 9", st.Succeeded, st.Failed.Total())
	}
}

// exitingRoute is a batcher whose Publish ends its goroutine
// (runtime.Goexit) the first time, taking nothing, and takes everything
// afterwards.
type exitingRoute struct {
	once sync.Once
}

func (r *exitingRoute) Publish(_ context.Context, msgs []*message.Message[int]) (int, error) {
	r.once.Do(runtime.Goexit)
	return len(msgs), nil
}

// Guarantee: a message acknowledged with its chunk (AckImmediately) keeps
// that one outcome, a success, even when handing it to its batcher ends
// the processor's goroutine: the processor neither reports it again nor
// counts it as failed.
func TestBatcherGoexitKeepsAnAckImmediatelyMessageASuccess(t *testing.T) {
	rec := acker.NewRecorder(false)
	opts := processor.Options[int, int]{Concurrency: 1, MaxDemand: 10,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			m.AckImmediately()
			return m.Data, nil
		}}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(&logtest.Records{}),
		Routes: []processing.NamedRoute[int]{{Name: "default", Route: &exitingRoute{}}}})
	publish(t, s, ints(rec, 0, 10))
	run(t, s)
	waitAcks(t, rec, 10)
	drain(t, s)
	assertOnce(t, rec, seq(0, 10))
	if n := rec.FailedCount(); n != 0 {
		t.Errorf("%d messages failed, want none: each was acknowledged before its batcher exited", n)
	}
	if st := s.Stats(0); st.Succeeded != 10 || st.Failed.Total() != 0 {
		t.Errorf("Stats: Succeeded %d, Failed %d; want 10 and 0", st.Succeeded, st.Failed.Total())
	}
}
