package tracing_test

import (
	"context"
	"fmt"
	"log/slog"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// A Kafka record carrying a traceparent header is handled in a span of
// the producer's trace, and its batch in a span linked to it.
func ExampleInstrument() {
	rec := tracetest.NewSpanRecorder() // in a program: an exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	opts, err := tracing.Instrument(pipeline.Options[string, string]{
		Name:       "orders",
		Logger:     slog.New(slog.DiscardHandler),
		Processors: processor.Options[string, string]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[string]) (string, error) { return m.Data, nil }},
		Batchers: []batcher.Options[string]{{Name: "default", BatchSize: 1,
			Handle: func(context.Context, []*message.Message[string], message.BatchInfo) error { return nil }}},
	}, tracing.Options{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	p, err := pipeline.New(opts)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	m := message.New("order 1", acker.NewRecorder(false), 1)
	m.Metadata = &kafka.Metadata{Topic: "orders", Headers: []kafka.Header{
		{Key: []byte("traceparent"), Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	}}
	if err := p.Push(ctx, m); err != nil {
		panic(err)
	}
	if err := p.Stop(ctx); err != nil {
		panic(err)
	}
	spans := rec.Ended()
	msg, batch := spans[0], spans[1]
	fmt.Printf("%s: trace %s, parent %s\n", msg.Name(), msg.SpanContext().TraceID(), msg.Parent().SpanID())
	fmt.Printf("%s: root %v, linked to the message span %v\n", batch.Name(), !batch.Parent().IsValid(),
		len(batch.Links()) == 1 && batch.Links()[0].SpanContext.SpanID() == msg.SpanContext().SpanID())
	// Output:
	// orders.processor: trace 4bf92f3577b34da6a3ce929d0e0e4736, parent 00f067aa0ba902b7
	// orders.batcher.default: root true, linked to the message span true
}

// A batch handler does what it does for each message in that message's
// trace: here a span of its own, as a publish through a topic sink with
// SinkHeaders would carry the message's trace downstream. SampleLinked
// records the batch span of any sampled message, although the provider
// samples no new trace.
func ExampleMessageContext() {
	rec := tracetest.NewSpanRecorder() // in a program: an exporter
	sampler := tracing.SampleLinked(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sampler))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	store := tp.Tracer("store")

	opts, err := tracing.Instrument(pipeline.Options[string, string]{
		Name:       "orders",
		Logger:     slog.New(slog.DiscardHandler),
		Processors: processor.Options[string, string]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[string]) (string, error) { return m.Data, nil }},
		Batchers: []batcher.Options[string]{{Name: "default", BatchSize: 1,
			Handle: func(ctx context.Context, batch []*message.Message[string], _ message.BatchInfo) error {
				for _, m := range batch {
					_, span := store.Start(tracing.MessageContext(ctx, m), "accepted "+m.Data)
					span.End()
				}
				return nil
			}}},
	}, tracing.Options{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	p, err := pipeline.New(opts)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	m := message.New("order 1", acker.NewRecorder(false), 1)
	m.Metadata = &kafka.Metadata{Topic: "orders", Headers: []kafka.Header{
		{Key: []byte("traceparent"), Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	}}
	if err := p.Push(ctx, m); err != nil {
		panic(err)
	}
	if err := p.Stop(ctx); err != nil {
		panic(err)
	}
	for _, s := range rec.Ended() {
		fmt.Printf("%s: in the producer's trace %v\n", s.Name(), s.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736")
	}
	// Unordered output:
	// orders.processor: in the producer's trace true
	// accepted order 1: in the producer's trace true
	// orders.batcher.default: in the producer's trace false
}
