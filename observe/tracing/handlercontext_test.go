package tracing_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/propagation"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

type stageKey struct{}

// Guarantee: when reading a message's trace context panics, its handler
// is still given the context the processor gave: its values, and its
// cancellation when the pipeline shuts down.
func TestAPanickingCarrierLeavesTheHandlerTheProcessorsContext(t *testing.T) {
	var got context.Context
	opts, err := tracing.Instrument(pipeline.Options[int, int]{
		Name: "ctx",
		Processors: processor.Options[int, int]{Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			got = ctx
			return m.Data, nil
		}},
	}, tracing.Options{
		TracerProvider: newRecorded(t).tp,
		Carrier:        func(any) propagation.TextMapCarrier { panic("the carrier broke") },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), stageKey{}, "processor"))
	if _, err := opts.Processors.Handle(ctx, message.New(1, acker.NewRecorder(false), 1)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if got.Value(stageKey{}) != "processor" || got.Err() == nil {
		t.Fatalf("handler's context has value %v and error %v, want the processor's value and its cancellation", got.Value(stageKey{}), got.Err())
	}
}

// Guarantee: a message whose Metadata is a propagation.TextMapCarrier
// itself continues the trace it carries.
func TestMetadataThatIsACarrierContinuesItsTrace(t *testing.T) {
	r := newRecorded(t)
	handle, _ := instrumented(t, r)
	m := message.New(1, acker.NewRecorder(false), 1)
	m.Metadata = propagation.MapCarrier(traceparent())
	if _, err := handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	spans := spansNamed(r, "direct.processor")
	if len(spans) != 1 || !spans[0].Parent().Equal(upstream) {
		t.Fatalf("message spans %v, want one whose parent is the upstream span", spans)
	}
}

// Guarantee: the span of a failed message records its error as an
// exception event, besides its error status.
func TestAFailedMessagesSpanRecordsTheError(t *testing.T) {
	r := newRecorded(t)
	opts, err := tracing.Instrument(pipeline.Options[int, int]{
		Name: "err",
		Processors: processor.Options[int, int]{Handle: func(context.Context, *message.Message[int]) (int, error) {
			return 0, errors.New("store down")
		}},
	}, tracing.Options{TracerProvider: r.tp})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = opts.Processors.Handle(context.Background(), message.New(1, acker.NewRecorder(false), 1))
	spans := spansNamed(r, "err.processor")
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	for _, e := range spans[0].Events() {
		for _, a := range e.Attributes {
			if e.Name == "exception" && a.Value.AsString() == "store down" {
				return
			}
		}
	}
	t.Fatalf("span events %v, want an exception with the message \"store down\"", spans[0].Events())
}
