package tracing_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// A message published into a retry topology through a Publisher with
// TopologyHeaders is handled, on its first delivery and on its retry
// after a hold, in spans that are children of the publishing span, in
// its trace, each naming the topology's main topic and how many times
// the message was retried before it. The hold passes in a
// testing/synctest bubble.
func TestTraceFollowsAMessageThroughATopologyAndItsRetry(t *testing.T) {
	synctest.Test(t, traceThroughATopology)
}

func traceThroughATopology(t *testing.T) {
	r := newRecorded(t)
	o := tracing.Options{TracerProvider: r.tp}
	m, err := topology.NewMemory[int](topology.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	top, err := topology.New("retried").Hold(time.Second).Build()
	if err != nil {
		t.Fatal(err)
	}
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []trace.SpanContext
	p := start(t, pipeline.Options[int, int]{
		Name:     "t",
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(ctx context.Context, msg *message.Message[int]) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, trace.SpanContextFromContext(ctx))
			if len(attempts) == 1 {
				return 0, topology.Retry(errors.New("flaky"))
			}
			return msg.Data, nil
		}},
	}, o)
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{Headers: tracing.TopologyHeaders[int](o)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, publishing := r.tp.Tracer("test").Start(t.Context(), "publish")
	if err := pub.Publish(ctx, 1); err != nil {
		t.Fatal(err)
	}
	publishing.End()
	wait.For(t, "both attempts' spans", func() bool { return len(spansNamed(r, "t.processor")) == 2 })
	stopPipeline(t, p)

	want := publishing.SpanContext()
	for i, sp := range spansNamed(r, "t.processor") {
		if sp.Parent().SpanID() != want.SpanID() || !sp.Parent().IsRemote() || sp.SpanContext().TraceID() != want.TraceID() {
			t.Errorf("attempt span %d: parent %v trace %v, want the publishing span %v (remote) in trace %v",
				i, sp.Parent().SpanID(), sp.SpanContext().TraceID(), want.SpanID(), want.TraceID())
		}
		attrs := attribute.NewSet(sp.Attributes()...)
		dest, _ := attrs.Value("messaging.destination.name")
		retries, ok := attrs.Value(tracing.AttrTopologyRetries)
		if dest.AsString() != "retried" || !ok || retries.AsInt64() != int64(i) {
			t.Errorf("attempt span %d: messaging.destination.name %q, %s %v, want %q and %d", i, dest.AsString(), tracing.AttrTopologyRetries, retries.String(), "retried", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 2 || attempts[0].SpanID() == attempts[1].SpanID() {
		t.Errorf("handler span contexts %v, want two attempts, each in a span of its own", attempts)
	}
}

// Off (no TracerProvider), TopologyHeaders is nil, so a Publisher
// publishes without headers.
func TestTopologyHeadersOffIsNil(t *testing.T) {
	if tracing.TopologyHeaders[int](tracing.Options{}) != nil {
		t.Fatal("TopologyHeaders without a TracerProvider is not nil")
	}
}
