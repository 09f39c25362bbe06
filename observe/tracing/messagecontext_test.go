package tracing_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: in a batch handler, the context MessageContext returns for a
// message carries that message's processor span, so that what the
// handler does for the message (a span it starts, a publish with
// SinkHeaders) joins the message's trace rather than the batch's; in
// small batches and in large ones (looked up through a map), also when
// the handler calls it from a goroutine per message at once, and for a
// message that is not of the batch the handler's context is returned
// unchanged.
func TestMessageContextCarriesTheMessagesSpanInABatchHandler(t *testing.T) {
	for _, tc := range []struct {
		size       int
		goroutines bool
	}{{3, false}, {100, false}, {3, true}, {100, true}} {
		size := tc.size
		t.Run(fmt.Sprintf("%d/goroutines=%v", size, tc.goroutines), func(t *testing.T) {
			r := newRecorded(t)
			rec := acker.NewRecorder(false)
			var msgs []*message.Message[int]
			for i := range size {
				m := message.New(i, rec, uint64(i))
				m.Metadata = &kafka.Metadata{Topic: "t", Offset: int64(i), Headers: kafkaTraceparent()}
				msgs = append(msgs, m)
			}
			stranger := message.New(-1, rec, 1<<40)
			var mu sync.Mutex
			var unchanged []bool
			tracer := r.tp.Tracer("handler")
			run(t, r, pipeline.Options[int, int]{
				Name:       "mc",
				Processors: processor.Options[int, int]{Concurrency: 2, Handle: echo[int]},
				Batchers: []batcher.Options[int]{{Name: "default", BatchSize: size, BatchTimeout: time.Minute,
					Handle: func(ctx context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
						publish := func(m *message.Message[int]) {
							_, s := tracer.Start(tracing.MessageContext(ctx, m), fmt.Sprintf("publish %d", m.Data))
							s.End()
						}
						var wg sync.WaitGroup
						for _, m := range batch {
							if tc.goroutines {
								wg.Go(func() { publish(m) })
							} else {
								publish(m)
							}
						}
						wg.Wait()
						mu.Lock()
						unchanged = append(unchanged, tracing.MessageContext(ctx, stranger) == ctx)
						mu.Unlock()
						return nil
					}}},
			}, msgs...)

			procOf := map[int64]trace.SpanContext{} // by offset
			for _, p := range spansNamed(r, "mc.processor") {
				procOf[attrs(p)["messaging.kafka.offset"].AsInt64()] = p.SpanContext()
			}
			if len(procOf) != size {
				t.Fatalf("%d message spans, want %d", len(procOf), size)
			}
			for i := range size {
				pubs := spansNamed(r, fmt.Sprintf("publish %d", i))
				if len(pubs) != 1 {
					t.Fatalf("%d spans of message %d's publish, want 1", len(pubs), i)
				}
				if got, want := pubs[0].Parent(), procOf[int64(i)]; got.SpanID() != want.SpanID() || got.TraceID() != upstream.TraceID() {
					t.Fatalf("message %d's publish has parent %v in trace %v, want its processor span %v in the upstream trace %v",
						i, got.SpanID(), got.TraceID(), want.SpanID(), upstream.TraceID())
				}
			}
			if len(unchanged) != 1 || !unchanged[0] {
				t.Fatalf("MessageContext of a message not in the batch changed the context: %v", unchanged)
			}
		})
	}
}

// Guarantee: MessageContext returns the context it is given outside a
// batch handler that Instrument wrapped.
func TestMessageContextOutsideABatchHandlerIsTheContext(t *testing.T) {
	ctx := context.Background()
	if got := tracing.MessageContext(ctx, message.New(1, nil, 1)); got != ctx {
		t.Fatalf("MessageContext outside a batch handler returned another context")
	}
}

// Guarantee: under SampleLinked, a batch span, a root linked to its
// messages' spans, is recorded whenever one of its messages is sampled,
// although its own trace id would not be sampled at the ratio; a root
// span without sampled links, and a span with a parent, are left to the
// wrapped sampler.
func TestSampleLinkedRecordsTheBatchOfASampledMessage(t *testing.T) {
	for _, linked := range []bool{false, true} {
		t.Run(fmt.Sprintf("linked=%v", linked), func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			base := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)) // roots never sampled
			sampler := base
			if linked {
				sampler = tracing.SampleLinked(base)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sampler))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			ack := acker.NewRecorder(false)
			var msgs []*message.Message[int]
			for i := range 4 {
				m := message.New(i, ack, uint64(i))
				if i == 2 { // one message of the batch comes from a sampled upstream trace
					m.Metadata = &kafka.Metadata{Topic: "t", Headers: kafkaTraceparent()}
				}
				msgs = append(msgs, m)
			}
			run(t, recorded{rec, tp}, pipeline.Options[int, int]{
				Name:       "sl",
				Processors: processor.Options[int, int]{Concurrency: 1, Handle: echo[int]},
				Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 4, BatchTimeout: time.Minute, Handle: noBatch[int]}},
			}, msgs...)
			procs, batches := spansNamed(recorded{rec, tp}, "sl.processor"), spansNamed(recorded{rec, tp}, "sl.batcher.default")
			if len(procs) != 1 {
				t.Fatalf("%d message spans recorded, want 1: the one of the sampled upstream trace", len(procs))
			}
			if want := map[bool]int{false: 0, true: 1}[linked]; len(batches) != want {
				t.Fatalf("%d batch spans recorded, want %d", len(batches), want)
			}
		})
	}
}
