package tracing_test

import (
	"context"
	"fmt"
	"log/slog"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
)

// A trace follows a message from pipeline "orders", which publishes it
// into a topic through a sink with SinkHeaders, to pipeline "billing",
// which reads the topic: billing's span for the message is a child of
// orders' span, in the trace of the Kafka record orders received.
func ExampleSinkHeaders() {
	rec := tracetest.NewSpanRecorder() // in a program: an exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	topts := tracing.Options{TracerProvider: tp}
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)

	paid, err := topic.NewTopic[string]("paid", topic.Options{}, nil)
	if err != nil {
		panic(err)
	}
	defer paid.Close()
	src, err := source.New(source.Options[string]{Topic: paid, Mode: topic.Balanced("billing")})
	if err != nil {
		panic(err)
	}
	s, err := sink.New(sink.Options[string]{Binding: topic.Binding[string]{Handle: paid}, Headers: tracing.SinkHeaders(topts)})
	if err != nil {
		panic(err)
	}
	start := func(opts pipeline.Options[string, string]) *pipeline.Pipeline[string, string] {
		opts.Logger = quiet
		opts, err := tracing.Instrument(opts, topts)
		if err != nil {
			panic(err)
		}
		p, err := pipeline.New(opts)
		if err != nil {
			panic(err)
		}
		if err := p.Start(ctx); err != nil {
			panic(err)
		}
		return p
	}
	billing := start(pipeline.Options[string, string]{Name: "billing", Producer: producer.Options[string]{Source: src},
		Processors: processor.Options[string, string]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[string]) (string, error) { return m.Data, nil }}})
	orders := start(pipeline.Options[string, string]{Name: "orders", Drainers: []pipeline.Drainer{s},
		Processors: processor.Options[string, string]{Concurrency: 1, Handle: s.Handler()}})

	m := message.New("order 1", acker.NewRecorder(false), 1)
	m.Metadata = &kafka.Metadata{Topic: "orders", Headers: []kafka.Header{
		{Key: []byte("traceparent"), Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	}}
	if err := orders.Push(ctx, m); err != nil {
		panic(err)
	}
	if err := orders.Stop(ctx); err != nil {
		panic(err)
	}
	paid.Close() // billing's source ends once it has received everything
	<-billing.Done()
	// The spans end in either order: billing may finish before the
	// handler that published to it returns. Find them by name.
	ended := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		ended[sp.Name()] = sp
	}
	up, down := ended["orders.processor"], ended["billing.processor"]
	fmt.Printf("%s: trace %s\n", up.Name(), up.SpanContext().TraceID())
	fmt.Printf("%s: trace %s, child of %s: %v\n", down.Name(), down.SpanContext().TraceID(), up.Name(),
		down.Parent().SpanID() == up.SpanContext().SpanID())
	// Output:
	// orders.processor: trace 4bf92f3577b34da6a3ce929d0e0e4736
	// billing.processor: trace 4bf92f3577b34da6a3ce929d0e0e4736, child of orders.processor: true
}
