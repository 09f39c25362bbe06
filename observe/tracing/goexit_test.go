package tracing_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: the span of a handler that ends its goroutine
// (runtime.Goexit, as t.FailNow does) says that the handler exited, and
// that of a handler that panics that it panicked, for message spans and
// batch spans alike; both end with an error status, and every message
// still gets one outcome.
func TestSpanOfAHandlerThatExitsSaysItExited(t *testing.T) {
	r := newRecorded(t)
	h := func(_ context.Context, m *message.Message[int]) (int, error) {
		switch m.Data {
		case 2:
			panic("boom")
		case 3:
			runtime.Goexit()
		}
		return m.Data, nil
	}
	bh := func(_ context.Context, b []*message.Message[int], _ message.BatchInfo) error {
		switch b[0].Data {
		case 10:
			panic("boom")
		case 11:
			runtime.Goexit()
		}
		return nil
	}
	rec := acker.NewRecorder(false)
	var msgs []*message.Message[int]
	for _, d := range []int{2, 3, 10, 11} {
		msgs = append(msgs, message.New(d, rec, uint64(d)))
	}
	run(t, r, pipeline.Options[int, int]{
		Name:   "exits",
		Logger: slog.New(slog.DiscardHandler),
		// Chunks of one message: the processor's exit fails its chunk.
		Processors: processor.Options[int, int]{Concurrency: 1, MaxDemand: 1, Handle: h},
		Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 1, BatchTimeout: time.Minute, Handle: bh}},
	}, msgs...)
	if got := rec.Total(); got != len(msgs) || rec.FailedCount() != len(msgs) {
		t.Errorf("%d outcomes, %d failed; want %d, all failed", got, rec.FailedCount(), len(msgs))
	}
	for _, c := range []struct {
		span string
		want []string
	}{
		{"exits.processor", []string{"handler panicked", "handler exited (runtime.Goexit)"}},
		{"exits.batcher.default", []string{"batch handler panicked", "batch handler exited (runtime.Goexit)"}},
	} {
		status := map[string]codes.Code{}
		for _, s := range spansNamed(r, c.span) {
			status[s.Status().Description] = s.Status().Code
		}
		for _, d := range c.want {
			if status[d] != codes.Error {
				t.Errorf("no %s span with error status %q among %v", c.span, d, status)
			}
		}
	}
}
