package sink_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// panickyReason is a nack reason whose Is method panics, so that the
// sink's done callback, which matches the reason against sentinels to
// choose the upstream disposition, panics in the tracked publisher.
type panickyReason struct{}

func (panickyReason) Error() string { return "panicky reason" }
func (panickyReason) Is(error) bool { panic("reason's Is") }

// Guarantee: the sink's tracked publisher logs to the sink's
// Options.Logger: a done callback of the sink that panicked (here on a
// downstream nack reason whose Is method panics) costs one error line on
// that logger, and none on slog.Default().
func TestTrackedPublisherLogsToTheSinksLogger(t *testing.T) {
	var def, own logtest.Lines
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	h, err := topic.NewTopic[int]("t", autoOpts(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	sub, err := h.Subscribe(topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	s, err := sink.New(sink.Options[int]{
		Binding: topic.Binding[int]{Handle: h, OnFull: topic.Block, AckPropagation: h.Options().AckPropagation},
		Logger:  slog.New(slog.NewTextHandler(&own, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	publishOne(t, s, acker.NewRecorder(false), 1)
	it, err := sub.Receive(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Nack(it.ID, panickyReason{}); err != nil {
		t.Fatal(err)
	}
	// The nack settles the publish, and calls the sink's done callback,
	// on this goroutine: its line is written by the time Nack returns.
	if lines := def.All(); len(lines) != 0 {
		t.Errorf("slog.Default() got %d lines, want none: %q", len(lines), lines)
	}
	lines := own.All()
	if len(lines) != 1 || !strings.Contains(lines[0], "done callback panicked") || !strings.Contains(lines[0], "topic=t") {
		t.Fatalf("the sink's logger got %q, want one line of the tracked publisher's done callback panic on topic t", lines)
	}
}
