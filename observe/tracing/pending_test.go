package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: only a message that succeeded in its processor and goes on to
// its batch with its own acknowledger leaves its span context waiting for
// the batch span; one acknowledged immediately (its batch copy carries no
// acknowledger, so no batch could claim the entry) or failed leaves
// nothing behind.
func TestOnlyAMessageBoundForItsBatchLeavesItsSpanWaiting(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for name, tc := range map[string]struct {
		handle func(*message.Message[int])
		want   int
	}{
		"bound for its batch":     {func(*message.Message[int]) {}, 1},
		"acknowledged at once":    {func(m *message.Message[int]) { m.AckImmediately() }, 0},
		"failed in its processor": {func(m *message.Message[int]) { m.Fail(nil) }, 0},
	} {
		tr := newTracer(Options{TracerProvider: tp})
		h := wrapHandler(tr, "p", true, func(_ context.Context, m *message.Message[int]) (int, error) {
			tc.handle(m)
			return m.Data, nil
		})
		if _, err := h(context.Background(), message.New(1, acker.NewRecorder(false), 1)); err != nil {
			t.Fatal(err)
		}
		if n := tr.links.size(); n != tc.want {
			t.Errorf("%s: %d span contexts wait for a batch, want %d", name, n, tc.want)
		}
	}
}
