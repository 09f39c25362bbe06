package tracing_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is the span context of a producer in another program.
var upstream = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
	SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	TraceFlags: trace.FlagsSampled,
	Remote:     true,
})

// traceparent is upstream as the W3C header a producer writes.
func traceparent() map[string]string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), upstream), c)
	return c
}

// kafkaTraceparent is traceparent as the headers of a Kafka record.
func kafkaTraceparent() []kafka.Header {
	var hdrs []kafka.Header
	for k, v := range traceparent() {
		hdrs = append(hdrs, kafka.Header{Key: []byte(k), Value: []byte(v)})
	}
	return hdrs
}

type recorded struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newRecorded(t *testing.T) recorded {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return recorded{rec, tp}
}

// run builds opts instrumented with r's provider, starts the pipeline,
// pushes msgs and stops it, which drains every message.
func run[T any](t *testing.T, r recorded, opts pipeline.Options[T, T], msgs ...*message.Message[T]) {
	t.Helper()
	opts, err := tracing.Instrument(opts, tracing.Options{TracerProvider: r.tp})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := p.Push(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func spansNamed(r recorded, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func echo[T any](_ context.Context, m *message.Message[T]) (T, error) { return m.Data, nil }

func noBatch[T any](context.Context, []*message.Message[T], message.BatchInfo) error { return nil }

// A message whose Kafka record carries a traceparent header is handled in a
// span that is a child of the producer's span, with the record's
// coordinates as attributes.
func TestMessageSpanContinuesTheKafkaRecordsTrace(t *testing.T) {
	r := newRecorded(t)
	rec := acker.NewRecorder(false)
	m := message.New(1, rec, 1)
	m.Metadata = &kafka.Metadata{Topic: "orders", Partition: 3, Offset: 42, Group: "billing", Headers: kafkaTraceparent()}
	run(t, r, pipeline.Options[int, int]{Name: "kt", Processors: processor.Options[int, int]{Concurrency: 1, Handle: echo[int]}}, m)

	spans := spansNamed(r, "kt.processor")
	if len(spans) != 1 {
		t.Fatalf("got %d processor spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Parent().SpanID() != upstream.SpanID() || s.SpanContext().TraceID() != upstream.TraceID() || !s.Parent().IsRemote() {
		t.Fatalf("span parent %v trace %v, want the remote producer span %v", s.Parent(), s.SpanContext().TraceID(), upstream)
	}
	if s.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kind %v, want consumer", s.SpanKind())
	}
	a := attrs(s)
	want := map[attribute.Key]attribute.Value{
		"messaging.system":                   attribute.StringValue("kafka"),
		"messaging.destination.name":         attribute.StringValue("orders"),
		"messaging.destination.partition.id": attribute.StringValue("3"),
		"messaging.kafka.offset":             attribute.Int64Value(42),
		"messaging.consumer.group.name":      attribute.StringValue("billing"),
		tracing.AttrPipeline:                 attribute.StringValue("kt"),
		tracing.AttrStage:                    attribute.StringValue("kt.processor"),
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("attribute %s = %v, want %v", k, a[k].String(), v.String())
		}
	}
}

// A message whose Pulsar properties carry a traceparent is handled in a
// child span of the producer's span.
func TestMessageSpanContinuesThePulsarMessagesTrace(t *testing.T) {
	r := newRecorded(t)
	m := message.New("x", acker.NewRecorder(false), 1)
	m.Metadata = &pulsar.Metadata{Topic: "persistent://public/default/in", Subscription: "sub", Partition: -1, Properties: traceparent()}
	run(t, r, pipeline.Options[string, string]{Name: "pt", Processors: processor.Options[string, string]{Concurrency: 1, Handle: echo[string]}}, m)

	spans := spansNamed(r, "pt.processor")
	if len(spans) != 1 {
		t.Fatalf("got %d processor spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Parent().SpanID() != upstream.SpanID() || s.SpanContext().TraceID() != upstream.TraceID() {
		t.Fatalf("span parent %v, want %v", s.Parent(), upstream)
	}
	a := attrs(s)
	if a["messaging.system"].AsString() != "pulsar" || a["messaging.consumer.group.name"].AsString() != "sub" || a["messaging.destination.name"].AsString() != "persistent://public/default/in" {
		t.Errorf("attributes %v", s.Attributes())
	}
}

// A message without trace context starts a trace of its own.
func TestMessageWithoutTraceContextStartsATrace(t *testing.T) {
	r := newRecorded(t)
	run(t, r, pipeline.Options[int, int]{Name: "root", Processors: processor.Options[int, int]{Concurrency: 1, Handle: echo[int]}},
		message.New(1, acker.NewRecorder(false), 1))
	spans := spansNamed(r, "root.processor")
	if len(spans) != 1 || spans[0].Parent().IsValid() {
		t.Fatalf("spans %v: want one root span", spans)
	}
}

// The context a handler is given carries the message's span, so that the
// spans the handler starts are its children.
func TestHandlerSpansAreChildrenOfTheMessageSpan(t *testing.T) {
	r := newRecorded(t)
	inner := r.tp.Tracer("handler")
	h := func(ctx context.Context, m *message.Message[int]) (int, error) {
		_, s := inner.Start(ctx, "query")
		s.End()
		return m.Data, nil
	}
	run(t, r, pipeline.Options[int, int]{Name: "nest", Processors: processor.Options[int, int]{Concurrency: 1, Handle: h}},
		message.New(1, acker.NewRecorder(false), 1))
	msg, q := spansNamed(r, "nest.processor"), spansNamed(r, "query")
	if len(msg) != 1 || len(q) != 1 {
		t.Fatalf("got %d message and %d handler spans", len(msg), len(q))
	}
	if q[0].Parent().SpanID() != msg[0].SpanContext().SpanID() {
		t.Fatalf("handler span's parent %v, want the message span %v", q[0].Parent().SpanID(), msg[0].SpanContext().SpanID())
	}
}

// A batch is handled in a span of its own, linked to the span of each of
// its messages in the processor, with the batch's size and trigger.
func TestBatchSpanLinksItsMessagesSpans(t *testing.T) {
	r := newRecorded(t)
	rec := acker.NewRecorder(false)
	var msgs []*message.Message[int]
	for i := range 3 {
		m := message.New(i, rec, uint64(i))
		if i == 0 {
			m.Metadata = &kafka.Metadata{Topic: "t", Headers: kafkaTraceparent()}
		}
		msgs = append(msgs, m)
	}
	run(t, r, pipeline.Options[int, int]{
		Name:       "bt",
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: echo[int]},
		Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 3, BatchTimeout: time.Minute, Handle: noBatch[int]}},
	}, msgs...)

	procs, batches := spansNamed(r, "bt.processor"), spansNamed(r, "bt.batcher.default")
	if len(procs) != 3 || len(batches) != 1 {
		t.Fatalf("got %d message spans and %d batch spans, want 3 and 1", len(procs), len(batches))
	}
	b := batches[0]
	if b.Parent().IsValid() {
		t.Errorf("batch span has parent %v, want a root", b.Parent())
	}
	linked := map[trace.SpanID]bool{}
	for _, l := range b.Links() {
		linked[l.SpanContext.SpanID()] = true
	}
	for _, p := range procs {
		if !linked[p.SpanContext().SpanID()] {
			t.Errorf("message span %v not linked from the batch span (links %v)", p.SpanContext().SpanID(), b.Links())
		}
	}
	if len(b.Links()) != 3 {
		t.Errorf("batch span has %d links, want 3", len(b.Links()))
	}
	a := attrs(b)
	if a["messaging.batch.message_count"].AsInt64() != 3 || a[tracing.AttrBatchTrigger].AsString() != "size" || a[tracing.AttrBatcher].AsString() != "default" {
		t.Errorf("batch attributes %v", b.Attributes())
	}
}

// A message the handler fails, fails with m.Fail, or panics on ends its
// span with an error status; a failing batch handler does the same to its
// batch span and counts the failed messages.
func TestFailuresEndSpansWithErrorStatus(t *testing.T) {
	r := newRecorded(t)
	h := func(_ context.Context, m *message.Message[int]) (int, error) {
		switch m.Data {
		case 1:
			return 0, errors.New("bad payload")
		case 2:
			m.Fail(errors.New("marked failed"))
		case 3:
			panic("boom")
		}
		return m.Data, nil
	}
	bh := func(_ context.Context, b []*message.Message[int], _ message.BatchInfo) error {
		b[0].Fail(errors.New("one bad"))
		return nil
	}
	rec := acker.NewRecorder(false)
	run(t, r, pipeline.Options[int, int]{
		Name:       "fail",
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: h},
		Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 1, BatchTimeout: time.Minute, Handle: bh}},
	}, message.New(1, rec, 1), message.New(2, rec, 2), message.New(3, rec, 3), message.New(4, rec, 4))

	status := map[string]int{}
	for _, s := range spansNamed(r, "fail.processor") {
		status[s.Status().Description] += int(s.Status().Code)
	}
	for _, d := range []string{"bad payload", "marked failed", "handler panicked"} {
		if status[d] != int(codes.Error) {
			t.Errorf("no error span %q among %v", d, status)
		}
	}
	if status[""] != int(codes.Unset) {
		t.Errorf("the successful message's span has status %v", status[""])
	}
	bs := spansNamed(r, "fail.batcher.default")
	if len(bs) != 1 || attrs(bs[0])[tracing.AttrBatchFailed].AsInt64() != 1 {
		t.Fatalf("batch spans %v, want one with one failed message", bs)
	}
}

// Guarantee: a batch span's boulevard.batch.failed counts every message
// the batch processor fails: all of them when the batch handler returns an
// error or panics, as the pipeline then fails the whole batch (the same
// count telemetry's BatchStop reports).
func TestBatchSpanCountsTheMessagesOfAFailedBatch(t *testing.T) {
	r := newRecorded(t)
	bh := func(_ context.Context, b []*message.Message[int], _ message.BatchInfo) error {
		switch b[0].Data {
		case 0:
			b[1].Fail(errors.New("one bad")) // the others fail with the batch
			return errors.New("batch refused")
		default:
			panic("boom")
		}
	}
	rec := acker.NewRecorder(false)
	var msgs []*message.Message[int]
	for i := range 6 {
		msgs = append(msgs, message.New(i/3, rec, uint64(i)))
	}
	run(t, r, pipeline.Options[int, int]{
		Name:       "whole",
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: echo[int]},
		Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 3, BatchTimeout: time.Minute, Handle: bh}},
	}, msgs...)

	if got := rec.Total(); got != 6 {
		t.Fatalf("%d outcomes, want 6", got)
	}
	bs := spansNamed(r, "whole.batcher.default")
	if len(bs) != 2 {
		t.Fatalf("got %d batch spans, want 2", len(bs))
	}
	for _, s := range bs {
		if s.Status().Code != codes.Error {
			t.Errorf("batch span status %v, want an error", s.Status())
		}
		if got, ok := attrs(s)[tracing.AttrBatchFailed]; !ok || got.AsInt64() != 3 {
			t.Errorf("batch span (%s) has %s = %v (set %v), want 3: the whole batch failed",
				s.Status().Description, tracing.AttrBatchFailed, got.AsInt64(), ok)
		}
	}
}

// Guarantee: a batch span's boulevard.batch.failed counts the failed
// messages of the batch as it was handed over, though the handler may
// rewrite its slice (here it drops the failed ones with slices.DeleteFunc,
// which clears the end of the slice), and instrumenting that handler
// changes no outcome.
func TestBatchSpanCountsFailuresTheHandlerDroppedFromItsSlice(t *testing.T) {
	r := newRecorded(t)
	bh := func(_ context.Context, b []*message.Message[int], _ message.BatchInfo) error {
		b[1].Fail(errors.New("one bad"))
		_ = slices.DeleteFunc(b, func(m *message.Message[int]) bool { return m.Failed() })
		return nil
	}
	rec := acker.NewRecorder(false)
	var msgs []*message.Message[int]
	for i := range 3 {
		msgs = append(msgs, message.New(i, rec, uint64(i)))
	}
	run(t, r, pipeline.Options[int, int]{
		Name:       "dropped",
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: echo[int]},
		Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 3, BatchTimeout: time.Minute, Handle: bh}},
	}, msgs...)

	if got, failed := rec.Total(), len(rec.Failed()); got != 3 || failed != 1 {
		t.Fatalf("%d outcomes, %d failed; want 3, 1 failed", got, failed)
	}
	bs := spansNamed(r, "dropped.batcher.default")
	if len(bs) != 1 {
		t.Fatalf("got %d batch spans, want 1", len(bs))
	}
	if got, ok := attrs(bs[0])[tracing.AttrBatchFailed]; !ok || got.AsInt64() != 1 {
		t.Errorf("batch span has %s = %v (set %v), want 1", tracing.AttrBatchFailed, got.AsInt64(), ok)
	}
}

// Guarantee: instrumenting changes no outcome: the wrapped handler returns
// what the declared handler returned, so a message the handler fails with
// m.Fail and a nil error is handled by the pipeline exactly as without
// tracing (it is not turned into a returned error, which the processor
// would log as a failure the handler returned).
func TestInstrumentedHandlerReturnsWhatTheHandlerReturned(t *testing.T) {
	r := newRecorded(t)
	failed := errors.New("marked failed")
	opts, err := tracing.Instrument(pipeline.Options[int, int]{
		Name: "same",
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			m.Fail(failed)
			return m.Data * 10, nil
		}},
	}, tracing.Options{TracerProvider: r.tp})
	if err != nil {
		t.Fatal(err)
	}
	m := message.New(4, acker.NewRecorder(false), 1)
	out, err := opts.Processors.Handle(context.Background(), m)
	if out != 40 || err != nil {
		t.Fatalf("instrumented handler returned (%v, %v), want the handler's (40, <nil>)", out, err)
	}
	if !m.Failed() || !errors.Is(m.Err(), failed) {
		t.Fatalf("message failed %v with %v, want it failed with %v", m.Failed(), m.Err(), failed)
	}
	spans := spansNamed(r, "same.processor")
	if len(spans) != 1 || spans[0].Status().Code != codes.Error || spans[0].Status().Description != "marked failed" {
		t.Fatalf("spans %v, want one with the error status \"marked failed\"", spans)
	}
}

// Off (no TracerProvider), Instrument returns the options it was given:
// the pipeline runs the handlers it was declared with and pays nothing.
func TestOffLeavesTheHandlersAlone(t *testing.T) {
	opts := pipeline.Options[int, int]{
		Name:       "off",
		Processors: processor.Options[int, int]{Handle: echo[int]},
		Batchers:   []batcher.Options[int]{{Name: "default", Handle: noBatch[int]}},
	}
	got, err := tracing.Instrument(opts, tracing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(got.Processors.Handle).Pointer() != reflect.ValueOf(opts.Processors.Handle).Pointer() ||
		reflect.ValueOf(got.Batchers[0].Handle).Pointer() != reflect.ValueOf(opts.Batchers[0].Handle).Pointer() {
		t.Fatal("Instrument without a TracerProvider replaced a handler")
	}
	on, err := tracing.Instrument(opts, tracing.Options{TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(on.Processors.Handle).Pointer() == reflect.ValueOf(opts.Processors.Handle).Pointer() {
		t.Fatal("Instrument with a TracerProvider left the handler unwrapped")
	}
	if reflect.ValueOf(opts.Batchers[0].Handle).Pointer() != reflect.ValueOf(noBatch[int]).Pointer() {
		t.Fatal("Instrument changed the caller's batcher options")
	}
}

// Guarantee: a TracerProvider that is a nil pointer (a program's
// `var tp *sdktrace.TracerProvider` left unset when tracing is
// disabled) is off, as a nil interface is: Instrument returns the
// options it was given, without panicking, and SinkHeaders returns nil.
func TestANilPointerTracerProviderIsOff(t *testing.T) {
	opts := pipeline.Options[int, int]{
		Name:       "off",
		Processors: processor.Options[int, int]{Handle: echo[int]},
		Batchers:   []batcher.Options[int]{{Name: "default", Handle: noBatch[int]}},
	}
	var tp *sdktrace.TracerProvider
	o := tracing.Options{TracerProvider: tp}
	var got pipeline.Options[int, int]
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Instrument with a nil *sdktrace.TracerProvider panicked: %v", r)
			}
		}()
		got, err = tracing.Instrument(opts, o)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(got.Processors.Handle).Pointer() != reflect.ValueOf(opts.Processors.Handle).Pointer() ||
		reflect.ValueOf(got.Batchers[0].Handle).Pointer() != reflect.ValueOf(opts.Batchers[0].Handle).Pointer() {
		t.Error("Instrument with a nil *sdktrace.TracerProvider replaced a handler")
	}
	if h := tracing.SinkHeaders(o); h != nil {
		t.Error("SinkHeaders with a nil *sdktrace.TracerProvider returned headers to inject, want nil (off)")
	}
}

// An invalid option is an error naming the field and the rule.
func TestInvalidOptionsNameTheField(t *testing.T) {
	_, err := tracing.Instrument(pipeline.Options[int, int]{}, tracing.Options{MaxPending: -1})
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("tracing.maxPending", "gte") {
		t.Fatalf("got %v, want a gte error on tracing.maxPending", err)
	}
}

// A source may give every message the same acknowledger and id and tell
// them apart by their ack data (topic/topology's Source does: id 0, a
// *record per message). The batch span still links each message's own
// processor span, never another message's.
func TestBatchSpanLinksEachMessagesOwnSpanWhenIDsRepeat(t *testing.T) {
	r := newRecorded(t)
	rec := acker.NewRecorder(false)
	var msgs []*message.Message[int]
	for i := range 3 {
		m := message.New(i, rec, 0)
		m.SetAckData(new(int))
		msgs = append(msgs, m)
	}
	run(t, r, pipeline.Options[int, int]{
		Name:       "rep",
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: echo[int]},
		Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 3, BatchTimeout: time.Minute, Handle: noBatch[int]}},
	}, msgs...)

	procs, batches := spansNamed(r, "rep.processor"), spansNamed(r, "rep.batcher.default")
	if len(procs) != 3 || len(batches) != 1 {
		t.Fatalf("got %d message spans and %d batch spans, want 3 and 1", len(procs), len(batches))
	}
	linked := map[trace.SpanID]bool{}
	for _, l := range batches[0].Links() {
		linked[l.SpanContext.SpanID()] = true
	}
	for _, p := range procs {
		if !linked[p.SpanContext().SpanID()] {
			t.Errorf("message span %v not linked from the batch span (links %v)", p.SpanContext().SpanID(), batches[0].Links())
		}
	}
}
