package tracing_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/sources/pulsar"
)

// brokenPropagator is a Propagator of the caller's whose Extract and
// Inject panic.
type brokenPropagator struct{ propagation.TraceContext }

func (brokenPropagator) Extract(context.Context, propagation.TextMapCarrier) context.Context {
	panic("the propagator broke")
}

func (brokenPropagator) Inject(context.Context, propagation.TextMapCarrier) {
	panic("the propagator broke")
}

// notPanicking runs f and fails t if it panicked.
func notPanicking(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// Guarantee: a Carrier or a Propagator of the caller's that panics changes
// no outcome: the processor handler and the batch handler run and what
// they return is returned, as without tracing. The message's span starts
// a trace of its own and records the panic as an exception event, the
// batch span has no link for a message whose context could not be read,
// and SinkHeaders gives no headers when Inject panics.
func TestACarrierOrPropagatorThatPanicsChangesNoOutcome(t *testing.T) {
	for name, o := range map[string]tracing.Options{
		"Carrier":    {Carrier: func(any) propagation.TextMapCarrier { panic("the carrier broke") }},
		"Propagator": {Propagator: brokenPropagator{}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRecorded(t)
			o.TracerProvider = r.tp
			batched := 0
			opts, err := tracing.Instrument(pipeline.Options[int, int]{
				Name:       "broken",
				Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data * 10, nil }},
				Batchers: []batcher.Options[int]{{Name: "default", Handle: func(_ context.Context, b []*message.Message[int], _ message.BatchInfo) error {
					batched += len(b)
					return nil
				}}},
			}, o)
			if err != nil {
				t.Fatal(err)
			}
			newMsg := func(id uint64) *message.Message[int] {
				m := message.New(4, acker.NewRecorder(false), id)
				m.Metadata = &pulsar.Metadata{Properties: traceparent()}
				return m
			}

			m := newMsg(1)
			notPanicking(t, "the processor handler", func() {
				if out, err := opts.Processors.Handle(context.Background(), m); out != 40 || err != nil || m.Failed() {
					t.Errorf("handler returned (%v, %v), failed %v, want the handler's (40, <nil>), not failed", out, err, m.Failed())
				}
			})
			if spans := spansNamed(r, "broken.processor"); len(spans) != 1 {
				t.Errorf("%d message spans, want 1", len(spans))
			} else {
				if spans[0].Parent().IsValid() {
					t.Errorf("message span has parent %v, want a trace of its own", spans[0].Parent())
				}
				recorded := false
				for _, e := range spans[0].Events() {
					for _, a := range e.Attributes {
						recorded = recorded || (e.Name == "exception" && strings.Contains(a.Value.String(), "broke"))
					}
				}
				if !recorded {
					t.Errorf("message span events %v, want an exception naming the panic", spans[0].Events())
				}
			}

			notPanicking(t, "the batch handler", func() {
				if err := opts.Batchers[0].Handle(context.Background(), []*message.Message[int]{newMsg(2)}, message.BatchInfo{}); err != nil || batched != 1 {
					t.Errorf("batch handler returned %v after %d messages, want <nil> after 1", err, batched)
				}
			})
			if bs := spansNamed(r, "broken.batcher.default"); len(bs) != 1 || len(bs[0].Links()) != 0 {
				t.Errorf("batch spans %v, want one without links", bs)
			}

			ctx, span := r.tp.Tracer("test").Start(context.Background(), "publish")
			defer span.End()
			notPanicking(t, "SinkHeaders", func() {
				hdr := tracing.SinkHeaders(o)(ctx, &message.Message[int]{})
				if name == "Propagator" && hdr != nil {
					t.Errorf("headers %v, want none when Inject panics", hdr)
				}
			})
		})
	}
}
