package processing_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Guarantee: a handler that fails its message with m.Fail and returns no
// error has that failure in its MessageStop event, as one that returns
// the error does.
func TestMessageStopHookSeesAFailureTheHandlerSetWithFail(t *testing.T) {
	errFailed := errors.New("failed by the handler")
	var mu sync.Mutex
	var stops []error
	hooks := &telemetry.Hooks{MessageStop: func(_ context.Context, e telemetry.Message) {
		mu.Lock()
		stops = append(stops, e.Err)
		mu.Unlock()
	}}
	opts := processor.Options[int, int]{Concurrency: 1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			m.Fail(errFailed)
			return m.Data, nil
		}}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Hooks: hooks, Logger: slog.New(&logtest.Records{})})
	rec := acker.NewRecorder(false)
	publish(t, s, ints(rec, 0, 3))
	run(t, s)
	drain(t, s)
	mu.Lock()
	defer mu.Unlock()
	if len(stops) != 3 {
		t.Fatalf("%d MessageStop events, want 3", len(stops))
	}
	for i, err := range stops {
		if !errors.Is(err, errFailed) {
			t.Errorf("MessageStop %d: Err %v, want the handler's %v", i, err, errFailed)
		}
	}
}

// Guarantee: the handler's latency is sampled (Stats().Latency) with
// message hooks set too, as without them.
func TestHandlerLatencySampledWithMessageHooks(t *testing.T) {
	hooks := &telemetry.Hooks{MessageStart: func(context.Context, telemetry.Message) {}}
	opts := processor.Options[int, int]{Concurrency: 1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Hooks: hooks})
	rec := acker.NewRecorder(false)
	publish(t, s, ints(rec, 0, 10))
	run(t, s)
	drain(t, s)
	samples := uint64(0)
	for _, c := range s.Stats(0).Latency.Counts {
		samples += c
	}
	if samples == 0 {
		t.Error("no handler latency sampled")
	}
}
