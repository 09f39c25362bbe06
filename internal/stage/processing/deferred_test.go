package processing_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: a message Prepare deferred (message.Defer) has its outcome
// reported by its deferrer, so a drain cut short before the handler sees
// it leaves nothing owed for it: Stats().Unhandled and the warnings'
// "messages" do not count it, and it counts in Succeeded, as a deferred
// message a batcher did not take does (stats.Processors.Unhandled).
func TestMessageDeferredByPrepareIsNotUnhandledWhenTheDrainIsCut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := acker.NewRecorder(false)
	handled := 0
	opts := processor.Options[int, int]{
		Concurrency: 1, MaxDemand: 10,
		Prepare: func(pctx context.Context, msgs []*message.Message[int]) error {
			for _, m := range msgs {
				m.Defer()
				ack, _, _ := m.Acknowledger()
				ack.Ack(pctx, []acker.Outcome{m.Outcome()}, nil)
			}
			cancel() // the hard stop, before the handler sees the chunk
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled++
			return m.Data, nil
		},
	}
	log := &stagetest.UnackedLog{}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(log)})
	publish(t, s, ints(rec, 0, 10))
	done := stagetest.Go(ctx, s)
	waitDone(t, done, "the processors to return")
	assertOnce(t, rec, seq(0, 10))
	st := s.Stats(0)
	sum, lines := log.Sum()
	if handled != 0 || st.In != 10 || st.Unhandled != 0 || st.Succeeded != 10 || sum != 0 {
		t.Errorf("handler saw %d; Stats In %d Succeeded %d Unhandled %d, want 10, 10, 0; warnings count %d unacknowledged %v",
			handled, st.In, st.Succeeded, st.Unhandled, sum, lines)
	}
}
