package sink

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: the sink's tracked publisher logs to the sink's
// Options.Logger: a done callback that panicked (here one the test puts in
// place of the sink's own, which reports the outcome and then panics; the
// sink's own contains the panics of what it calls) costs one error line
// on that logger, and none on slog.Default().
func TestTrackedPublisherLogsToTheSinksLogger(t *testing.T) {
	def := logtest.CaptureDefault(t)
	var own logtest.Lines

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	h, err := topic.NewTopic[int]("t", topic.Options{AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	s, err := New(Options[int]{
		Binding: topic.Binding[int]{Handle: h, OnFull: topic.Block, AckPropagation: h.Options().AckPropagation},
		Logger:  slog.New(slog.NewTextHandler(&own, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.pool.New = func() any {
		p := &pending[int]{s: s}
		p.fn = func(r topic.Result) {
			p.done(r)
			panic("done callback")
		}
		return p
	}
	rec := acker.NewRecorder(false)
	if err := s.Publish(ctx, message.New(1, rec, 1)); err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	// The ack settles the publish, and calls the done callback, on this
	// goroutine: its line is written by the time Ack returns.
	if lines := def.All(); len(lines) != 0 {
		t.Errorf("slog.Default() got %d lines, want none: %q", len(lines), lines)
	}
	lines := own.All()
	if len(lines) != 1 || !strings.Contains(lines[0], "done callback panicked") || !strings.Contains(lines[0], "topic=t") {
		t.Fatalf("the sink's logger got %q, want one line of the tracked publisher's done callback panic on topic t", lines)
	}
	if rec.Total() != 1 || len(rec.Failed()) != 0 {
		t.Fatalf("recorded %d outcomes, %d failed; want one success", rec.Total(), len(rec.Failed()))
	}
}
