package tracing_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
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

// spanOf records the span context each value was handled in.
type spanOf struct {
	mu sync.Mutex
	m  map[int]trace.SpanContext
}

func (s *spanOf) handler(next func(context.Context, *message.Message[int]) error) processor.Handler[int, int] {
	return func(ctx context.Context, m *message.Message[int]) (int, error) {
		s.mu.Lock()
		s.m[m.Data] = trace.SpanContextFromContext(ctx)
		s.mu.Unlock()
		if next != nil {
			return m.Data, next(ctx, m)
		}
		return m.Data, nil
	}
}

func (s *spanOf) get(v int) trace.SpanContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[v]
}

func start[T any](t *testing.T, opts pipeline.Options[T, T], o tracing.Options) *pipeline.Pipeline[T, T] {
	t.Helper()
	opts, err := tracing.Instrument(opts, o)
	if err != nil {
		t.Fatal(err)
	}
	opts.ShutdownTimeout = 10 * time.Second
	p, err := pipeline.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

func stopPipeline[T any](t *testing.T, p *pipeline.Pipeline[T, T]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Errorf("stopping %v", err)
	}
}

// A message pipeline A publishes into a topic through a sink with
// SinkHeaders is handled in pipeline B, which reads the topic, in a span
// that is a child of A's span for the message: the trace continues across
// the topic, back to the producer of A's Kafka record when there is one.
func TestTraceFollowsAMessageThroughATopic(t *testing.T) {
	r := newRecorded(t)
	o := tracing.Options{TracerProvider: r.tp}
	h, err := topic.NewTopic[int]("hop", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("b")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sink.New(sink.Options[int]{Binding: topic.Binding[int]{Handle: h}, Headers: tracing.SinkHeaders(o)})
	if err != nil {
		t.Fatal(err)
	}
	inA, inB := &spanOf{m: map[int]trace.SpanContext{}}, &spanOf{m: map[int]trace.SpanContext{}}
	b := start(t, pipeline.Options[int, int]{
		Name:       "b",
		Producer:   producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: inB.handler(nil)},
	}, o)
	a := start(t, pipeline.Options[int, int]{
		Name:       "a",
		Drainers:   []pipeline.Drainer{s},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: inA.handler(s.Publish)},
	}, o)
	const n = 4
	rec := acker.NewRecorder(false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for v := range n {
		m := message.New(v, rec, uint64(v))
		if v == 0 {
			m.Metadata = &kafka.Metadata{Topic: "orders", Headers: kafkaTraceparent()}
		}
		if err := a.Push(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	stopPipeline(t, a)
	wait.For(t, "B's message spans", func() bool { return len(spansNamed(r, "b.processor")) == n })
	stopPipeline(t, b)

	byID := map[trace.SpanID]int{}
	spans := spansNamed(r, "b.processor")
	for i, sp := range spans {
		byID[sp.SpanContext().SpanID()] = i
	}
	for v := range n {
		sa, sb := inA.get(v), inB.get(v)
		if !sa.IsValid() || !sb.IsValid() {
			t.Fatalf("message %d: span contexts A %v, B %v", v, sa, sb)
		}
		i, ok := byID[sb.SpanID()]
		if !ok {
			t.Fatalf("message %d: B's span %v not recorded", v, sb.SpanID())
		}
		sp := spans[i]
		if sp.Parent().SpanID() != sa.SpanID() || !sp.Parent().IsRemote() || sb.TraceID() != sa.TraceID() {
			t.Errorf("message %d: B's span parent %v trace %v, want A's span %v (remote) in trace %v",
				v, sp.Parent().SpanID(), sb.TraceID(), sa.SpanID(), sa.TraceID())
		}
		if v == 0 && sb.TraceID() != upstream.TraceID() {
			t.Errorf("message 0: trace %v, want the Kafka producer's %v", sb.TraceID(), upstream.TraceID())
		}
		at := attrs(sp)
		if at["messaging.destination.name"].AsString() != "hop" || at["messaging.consumer.group.name"].AsString() != "b" {
			t.Errorf("message %d: B's span attributes %v", v, sp.Attributes())
		}
	}
}

// Off (no TracerProvider), SinkHeaders is nil, so the sink publishes
// without headers and calls nothing; a topic message without headers has
// no carrier; and a publish outside any span injects nothing. None of it
// allocates.
func TestTopicTracingOffCostsNothing(t *testing.T) {
	if tracing.SinkHeaders(tracing.Options{}) != nil {
		t.Fatal("SinkHeaders without a TracerProvider is not nil")
	}
	h, err := topic.NewTopic[int]("off", topic.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	s, err := sink.New(sink.Options[int]{Binding: topic.Binding[int]{Handle: h}, Headers: tracing.SinkHeaders(tracing.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var m message.Message[int]
	dst := make([]topic.Item[int], 1)
	md := &source.Metadata{Topic: "off"}
	allocs := testing.AllocsPerRun(1000, func() {
		m.Init(1, acker.Discard, 1)
		if err := s.Publish(ctx, &m); err != nil {
			t.Fatal(err)
		}
		if n, err := sub.ReceiveBatch(ctx, dst); err != nil || n != 1 || dst[0].Headers != nil {
			t.Fatalf("ReceiveBatch = %d, %v, headers %v", n, err, dst[0].Headers)
		}
		if tracing.DefaultCarrier(md) != nil {
			t.Fatal("a topic message without headers has a carrier")
		}
	})
	if allocs != 0 {
		t.Errorf("tracing off: %v allocations per publish, receive and carrier lookup, want 0", allocs)
	}

	on := tracing.SinkHeaders(tracing.Options{TracerProvider: newRecorded(t).tp})
	allocs = testing.AllocsPerRun(1000, func() {
		if hdr := on(ctx, &m); hdr != nil {
			t.Fatalf("headers %v injected outside any span", hdr)
		}
	})
	if allocs != 0 {
		t.Errorf("tracing on, no span: %v allocations per call, want 0", allocs)
	}
}

// Inside a span, SinkHeaders injects its W3C trace context, which the
// default carrier reads back from the topic source's metadata.
func TestSinkHeadersRoundTrip(t *testing.T) {
	r := newRecorded(t)
	ctx, span := r.tp.Tracer("test").Start(context.Background(), "publish")
	defer span.End()
	hdr := tracing.SinkHeaders(tracing.Options{TracerProvider: r.tp})(ctx, &message.Message[int]{})
	if hdr.Get("traceparent") == "" {
		t.Fatalf("headers %v carry no traceparent", hdr)
	}
	c := tracing.DefaultCarrier(&source.Metadata{Headers: hdr})
	if c == nil {
		t.Fatal("no carrier for a topic message with headers")
	}
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("extracted %v, want %v", got, span.SpanContext())
	}
}
