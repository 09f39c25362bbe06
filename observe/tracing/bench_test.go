package tracing_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// BenchmarkTracing runs b.N messages through two processors and a batcher
// of 100: without tracing (off), with every message and batch sampled into
// an SDK provider that exports nothing (sampled), and with a provider that
// samples nothing (unsampled); each with messages that carry no trace
// context, and (the "-context" cases) with messages that each carry a
// W3C traceparent, as records of a traced producer do.
func BenchmarkTracing(b *testing.B) {
	upstream := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	sampled := func() *sdktrace.TracerProvider {
		return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	}
	unsampled := func() *sdktrace.TracerProvider {
		return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	for _, c := range []struct {
		name     string
		tp       func() *sdktrace.TracerProvider
		metadata any
	}{
		{"off", nil, nil},
		{"sampled", sampled, nil},
		{"unsampled", unsampled, nil},
		{"off-context", nil, upstream},
		{"sampled-context", sampled, upstream},
		{"unsampled-context", unsampled, upstream},
	} {
		b.Run(c.name, func(b *testing.B) {
			ack := &benchsrc.Counter{}
			src := benchsrc.NewSlab(b.N, ack)
			src.Metadata = c.metadata
			opts := pipeline.Options[int, int]{
				Name:     "bench",
				Logger:   slog.New(slog.DiscardHandler),
				Producer: producer.Options[int]{Source: src},
				Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
					return m.Data*2 + 1, nil
				}},
				Batchers: []batcher.Options[int]{{Name: "default", BatchSize: 100,
					Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil }}},
			}
			var o tracing.Options
			if c.tp != nil {
				tp := c.tp()
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				o.TracerProvider = tp
			}
			opts, err := tracing.Instrument(opts, o)
			if err != nil {
				b.Fatal(err)
			}
			p, err := pipeline.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			close(src.Start)
			<-p.Done()
			b.StopTimer()
			runtime.ReadMemStats(&after)
			if n := ack.N.Load(); n != int64(b.N) {
				b.Fatalf("acknowledged %d of %d messages", n, b.N)
			}
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/msg")
		})
	}
}

// BenchmarkSinkHeaders measures SinkHeaders for one published message:
// inside a sampled span (the headers it injects), outside any span, and
// off (no TracerProvider: the sink calls nothing, so nothing is measured
// but the nil check a sink makes).
func BenchmarkSinkHeaders(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	inSpan, span := tp.Tracer("bench").Start(context.Background(), "publish")
	defer span.End()
	var m message.Message[int]
	for _, c := range []struct {
		name string
		ctx  context.Context
		o    tracing.Options
	}{
		{"span", inSpan, tracing.Options{TracerProvider: tp}},
		{"no-span", context.Background(), tracing.Options{TracerProvider: tp}},
		{"off", inSpan, tracing.Options{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := tracing.SinkHeaders(c.o)
			b.ReportAllocs()
			for b.Loop() {
				if h != nil {
					_ = h(c.ctx, &m)
				}
			}
		})
	}
}
