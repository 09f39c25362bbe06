// Package tracing traces a pipeline's work with OpenTelemetry: a span per
// message a processor handles and a span per batch a batch processor
// handles, linked to the spans of its messages. A message's span continues
// the trace its producer started when the message carries W3C trace
// context: in its Kafka record headers or its Pulsar message properties
// ("traceparent", "tracestate"), so that a trace follows a message from
// the program that produced it into the pipeline.
//
// Between pipelines, through an internal topic, the trace follows the
// message too: SinkHeaders is a topic sink's Options.Headers that injects
// the publishing handler's span as W3C trace context into the message's
// topic headers, and the downstream pipeline reads it from the topic
// source's metadata (*source.Metadata), so that its span for the message
// is a child of the upstream pipeline's:
//
//	topts := tracing.Options{TracerProvider: tp}
//	s, err := sink.New(sink.Options[T]{Binding: b, Headers: tracing.SinkHeaders(topts)})
//
// Through a retry/DLQ topology (package topic/topology) likewise:
// TopologyHeaders is a topology Publisher's PublisherOptions.Headers, the
// letters carry the trace context through holds, requeues and the DLQ,
// and the topology source's metadata (*topology.Delivery) gives it back,
// so that every attempt's span is a child of the publishing span.
//
// In a batch handler, MessageContext gives the context of one message of
// the batch, carrying the message's span rather than the batch's, so that
// what the handler does for that message (a publish, a call) joins the
// message's trace. SampleLinked wraps an SDK sampler so that the batch
// span of any sampled message is recorded.
//
// Tracing is off unless Options.TracerProvider is set (a nil pointer, such
// as a *sdktrace.TracerProvider left unset, is off too); off, Instrument
// returns the pipeline's options unchanged and the pipeline runs exactly
// the code it runs without this package.
//
//	opts, err := tracing.Instrument(opts, tracing.Options{TracerProvider: tp})
//	p, err := pipeline.New(opts)
//
// Spans are made around the handlers (Instrument wraps Processors.Handle
// and every batcher's Handle), so that the context a handler is given
// carries its span: the spans a handler starts for its own calls (a
// database query, an HTTP request) are children of the message's or the
// batch's span.
//
// A span whose handler fails ends with an error status: the error's text,
// "handler panicked" (or "batch handler panicked") when it panicked, and
// "handler exited (runtime.Goexit)" (or "batch handler exited
// (runtime.Goexit)") when it ended its goroutine, as t.FailNow does.
//
// Tracing changes no message's outcome. A Carrier or Propagator of the
// caller's that panics while a message's trace context is read is taken
// as no trace context: the message's span starts a trace of its own and
// records the panic as an exception event, the batch span has no link
// for that message, and the handlers run as they would without tracing.
// SinkHeaders gives no headers when the Propagator's Inject panics.
package tracing

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/validate"
)

// ScopeName is the instrumentation scope of the tracer the package asks
// the TracerProvider for.
const ScopeName = "github.com/boulevard-go/boulevard/observe/tracing"

// DefaultMaxPending is the default Options.MaxPending.
const DefaultMaxPending = 1 << 16

// Attribute keys the spans carry beside OpenTelemetry's messaging
// attributes (messaging.system, messaging.destination.name,
// messaging.destination.partition.id, messaging.kafka.offset,
// messaging.message.id, messaging.consumer.group.name,
// messaging.batch.message_count).
const (
	// AttrPipeline is the pipeline's name.
	AttrPipeline = attribute.Key("boulevard.pipeline")
	// AttrStage is the stage's name: "<pipeline>.processor" or
	// "<pipeline>.batcher.<name>".
	AttrStage = attribute.Key("boulevard.stage")
	// AttrBatcher is the batcher's name (batch spans).
	AttrBatcher = attribute.Key("boulevard.batcher")
	// AttrBatchKey is the batch key (batch spans).
	AttrBatchKey = attribute.Key("boulevard.batch.key")
	// AttrBatchTrigger is why the batch was emitted: size, timeout, flush
	// or weight (batch spans).
	AttrBatchTrigger = attribute.Key("boulevard.batch.trigger")
	// AttrBatchFailed is the number of the batch's messages that failed:
	// all of them when the batch handler returns an error or panics
	// (batch spans).
	AttrBatchFailed = attribute.Key("boulevard.batch.failed")
	// AttrTopologyRetries is how many times a topology's message was
	// retried before this delivery (message spans of a
	// *topology.Delivery).
	AttrTopologyRetries = attribute.Key("boulevard.topology.retries")
	// AttrTopologyDeathReason is why a dead letter read back
	// (topology.NewDeadSource) died: rejected, max_retries, poisoned or
	// timeout (message spans of a *topology.Delivery).
	AttrTopologyDeathReason = attribute.Key("boulevard.topology.death.reason")
)

// Options configure tracing. The zero value is off.
type Options struct {
	// TracerProvider makes the tracer the spans come from. Nil (the
	// default), or a nil pointer (such as a *sdktrace.TracerProvider
	// left unset), is off: Instrument returns the options it is given,
	// and SinkHeaders nil.
	TracerProvider trace.TracerProvider `name:"-"`
	// Propagator reads trace context from a message's carrier. Default
	// propagation.TraceContext{} (W3C traceparent and tracestate).
	Propagator propagation.TextMapPropagator `name:"-"`
	// Carrier returns the carrier of a message's Metadata, or nil when it
	// has none. Default: the headers of a *kafka.Metadata, the properties
	// of a *pulsar.Metadata, the topic headers of a *source.Metadata, the
	// letter headers of a *topology.Delivery, and any Metadata that is
	// itself a propagation.TextMapCarrier.
	// A Carrier (or a Propagator) that panics reads as no trace context
	// (see the package doc).
	Carrier func(metadata any) propagation.TextMapCarrier `name:"-"`
	// MaxPending bounds how many message span contexts are remembered
	// between a message's processor and its batch, for the batch span's
	// links (a table keyed by the message's acknowledger, id and pointer
	// ack data). A message that waits behind more than MaxPending/2 others
	// has its batch linked to the context it arrived with instead of its
	// processor span. 0 means DefaultMaxPending; at most 1<<24.
	MaxPending int `validate:"gte=0,lte=16777216"`
}

// WithDefaults returns o with every zero field but TracerProvider (nil is
// off) replaced by its default: Propagator propagation.TraceContext{},
// Carrier DefaultCarrier, MaxPending DefaultMaxPending.
func (o Options) WithDefaults() Options {
	if o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	if o.Carrier == nil {
		o.Carrier = DefaultCarrier
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	return o
}

// Validate returns nil or a validate.Errors naming every broken rule
// ("tracing.maxPending must be ≤ 16777216"). Instrument calls it.
func (o Options) Validate() error { return validate.Struct("tracing", &o) }

// Instrument returns opts with its processor handler and every batcher's
// handler wrapped so that each message and each batch they handle is a
// span, or opts unchanged when o.TracerProvider is nil. It reports an
// invalid o as a validate.Errors naming the field.
func Instrument[In, Out any](opts pipeline.Options[In, Out], o Options) (pipeline.Options[In, Out], error) {
	if err := o.Validate(); err != nil {
		return opts, err
	}
	if o.off() {
		return opts, nil
	}
	t := newTracer(o)
	batched := len(opts.Batchers) > 0
	if h := opts.Processors.Handle; h != nil {
		opts.Processors.Handle = wrapHandler(t, opts.Name, batched, h)
	}
	if batched {
		bs := make([]batcher.Options[Out], len(opts.Batchers))
		copy(bs, opts.Batchers)
		for i := range bs {
			if h := bs[i].Handle; h != nil {
				bs[i].Handle = wrapBatchHandler(t, opts.Name, bs[i].Name, h)
			}
		}
		opts.Batchers = bs
	}
	return opts, nil
}

// off reports whether tracing is off: o.TracerProvider is nil or a nil
// pointer, whose Tracer method would panic.
func (o Options) off() bool {
	if o.TracerProvider == nil {
		return true
	}
	v := reflect.ValueOf(o.TracerProvider)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

type tracer struct {
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	carrier func(any) propagation.TextMapCarrier
	links   *linkTable
}

func newTracer(o Options) *tracer {
	o = o.WithDefaults()
	return &tracer{
		tracer:  o.TracerProvider.Tracer(ScopeName),
		prop:    o.Propagator,
		carrier: o.Carrier,
		links:   newLinkTable(o.MaxPending),
	}
}

// DefaultCarrier is the default Options.Carrier: the record headers of a
// *kafka.Metadata, the properties of a *pulsar.Metadata, the topic headers
// of a *source.Metadata (a message read from an internal topic), the
// letter headers of a *topology.Delivery (a message of a retry/DLQ
// topology, its retries and dead letters included), a Metadata that is a
// propagation.TextMapCarrier itself, and nil for anything else.
func DefaultCarrier(metadata any) propagation.TextMapCarrier {
	switch md := metadata.(type) {
	case *kafka.Metadata:
		if md == nil || len(md.Headers) == 0 {
			return nil
		}
		return kafkaHeaders{md}
	case *pulsar.Metadata:
		if md == nil || len(md.Properties) == 0 {
			return nil
		}
		return propagation.MapCarrier(md.Properties)
	case *source.Metadata:
		if md == nil || len(md.Headers) == 0 {
			return nil
		}
		return md.Headers
	case *topology.Delivery:
		if md == nil || len(md.Headers) == 0 {
			return nil
		}
		return md.Headers
	case propagation.TextMapCarrier:
		return md
	}
	return nil
}

// kafkaHeaders reads a record's headers as a carrier. Extraction only
// reads: Set does nothing, as the record was consumed.
type kafkaHeaders struct{ md *kafka.Metadata }

func (h kafkaHeaders) Get(key string) string {
	v, _ := h.md.Header(key)
	return string(v)
}

func (h kafkaHeaders) Set(string, string) {}

func (h kafkaHeaders) Keys() []string {
	keys := make([]string, len(h.md.Headers))
	for i, hd := range h.md.Headers {
		keys[i] = string(hd.Key)
	}
	return keys
}

// remote returns ctx with the trace context the message carries, if any.
// A Carrier or Propagator that panics reads as no trace context: remote
// then returns ctx and the value of the panic (nil otherwise).
func (t *tracer) remote(ctx context.Context, md any) (out context.Context, panicked any) {
	defer func() {
		if r := recover(); r != nil {
			out, panicked = ctx, r
		}
	}()
	if c := t.carrier(md); c != nil {
		return t.prop.Extract(ctx, c), nil
	}
	return ctx, nil
}

// contextPanic is the error a message's span records when reading its
// trace context panicked.
func contextPanic(r any) error {
	return fmt.Errorf("tracing: reading the message's trace context panicked: %v", r)
}

// sourceAttrs are the messaging attributes of a message's Metadata.
func sourceAttrs(md any) []attribute.KeyValue {
	switch md := md.(type) {
	case *kafka.Metadata:
		if md == nil {
			return nil
		}
		return []attribute.KeyValue{
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", md.Topic),
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(md.Partition))),
			attribute.Int64("messaging.kafka.offset", md.Offset),
			attribute.String("messaging.consumer.group.name", md.Group),
		}
	case *pulsar.Metadata:
		if md == nil {
			return nil
		}
		return []attribute.KeyValue{
			attribute.String("messaging.system", "pulsar"),
			attribute.String("messaging.destination.name", md.Topic),
			attribute.String("messaging.consumer.group.name", md.Subscription),
			attribute.String("messaging.message.id", md.MessageIDString()),
		}
	case *source.Metadata:
		if md == nil {
			return nil
		}
		attrs := []attribute.KeyValue{attribute.String("messaging.destination.name", string(md.Topic))}
		if g := md.Mode.Group(); g != "" {
			attrs = append(attrs, attribute.String("messaging.consumer.group.name", string(g)))
		}
		return attrs
	case *topology.Delivery:
		if md == nil {
			return nil
		}
		attrs := []attribute.KeyValue{attribute.String("messaging.destination.name", md.Topic),
			AttrTopologyRetries.Int(md.Retries)}
		if md.Group != "" {
			attrs = append(attrs, attribute.String("messaging.consumer.group.name", md.Group))
		}
		if md.Death != nil {
			attrs = append(attrs, AttrTopologyDeathReason.String(string(md.Death.Reason)))
		}
		return attrs
	}
	return nil
}

// SinkHeaders returns a topic sink's Options.Headers (package topic/sink)
// that gives each published message the W3C trace context of the span the
// publishing call's context carries (with o.Propagator, default
// propagation.TraceContext{}: "traceparent" and "tracestate"), or nil
// headers when that context carries no span. In a handler that Instrument
// wraps, that span is the message's (a processor handler) or the batch's
// (a batch handler), so the downstream pipeline's span for the message is
// its child.
//
// With tracing off (o.TracerProvider nil, or a nil pointer) it returns
// nil: the sink then publishes without headers and calls nothing, so it
// costs nothing.
func SinkHeaders(o Options) func(ctx context.Context, m message.Keyed) topic.Headers {
	if o.off() {
		return nil
	}
	prop := o.WithDefaults().Propagator
	return func(ctx context.Context, _ message.Keyed) topic.Headers { return inject(prop, ctx) }
}

// TopologyHeaders returns a topology Publisher's PublisherOptions.Headers
// (package topic/topology) that gives each published message the W3C
// trace context of the span Publish's context carries, as SinkHeaders
// does for a topic sink: the span of a topology pipeline's message (the
// default Carrier reads it from its *topology.Delivery) is a child of the
// publishing span, on its first delivery as on its retries, and so is a
// dead letter's. With tracing off it returns nil: the Publisher then
// publishes without headers.
func TopologyHeaders[T any](o Options) func(ctx context.Context, v T) topic.Headers {
	if o.off() {
		return nil
	}
	prop := o.WithDefaults().Propagator
	return func(ctx context.Context, _ T) topic.Headers { return inject(prop, ctx) }
}

// inject returns the trace context of the span ctx carries as headers,
// written by prop; nil when ctx carries none, prop writes nothing, or
// prop panics.
func inject(prop propagation.TextMapPropagator, ctx context.Context) (h topic.Headers) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	defer func() {
		if recover() != nil { // a Propagator that panics injects nothing
			h = nil
		}
	}()
	h = make(topic.Headers, 2)
	prop.Inject(ctx, h)
	if len(h) == 0 {
		return nil
	}
	return h
}

// wrapHandler makes a span per message around h, a child of the trace
// context the message carries. When the pipeline has batchers, it keeps
// the span's context for the batch span's link.
func wrapHandler[In, Out any](t *tracer, pipe string, batched bool, h processor.Handler[In, Out]) processor.Handler[In, Out] {
	stage := pipe + ".processor"
	// Attributes are set on recording spans only, after the sampler
	// decided (it sees the span's name, kind and parent), so that a
	// message whose span is not sampled costs only the span and its
	// context.
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	base := []attribute.KeyValue{AttrPipeline.String(pipe), AttrStage.String(stage)}
	return func(ctx context.Context, m *message.Message[In]) (Out, error) {
		rctx, panicked := t.remote(ctx, m.Metadata)
		sctx, span := t.tracer.Start(rctx, stage, start...)
		if span.IsRecording() {
			span.SetAttributes(base...)
			if attrs := sourceAttrs(m.Metadata); attrs != nil {
				span.SetAttributes(attrs...)
			}
			if panicked != nil {
				span.RecordError(contextPanic(panicked))
			}
		}
		key, keyed := linkKeyOf(m)
		done := false
		defer func() {
			if done {
				return
			}
			// The handler panicked (the processor recovers it: the panic
			// goes on, with its value) or ended its goroutine
			// (runtime.Goexit).
			r := recover()
			span.SetStatus(codes.Error, abnormalEnd(r, "handler"))
			if keyed {
				t.links.forget(key)
			}
			span.End()
			if r != nil {
				panic(r)
			}
		}()
		out, err := h(sctx, m)
		done = true
		// A message failed with m.Fail ends its span with an error
		// status too; the handler's results are returned as they are.
		failure := err
		if failure == nil && m.Failed() {
			failure = m.Err()
		}
		if failure != nil {
			span.RecordError(failure)
			span.SetStatus(codes.Error, failure.Error())
		}
		if batched && keyed {
			if failure == nil && !m.AckRequested() {
				t.links.remember(key, span.SpanContext())
			} else {
				t.links.forget(key)
			}
		}
		span.End()
		return out, err
	}
}

// wrapBatchHandler makes a span per batch around h, a new root linked to
// each message's processor span (or, when that is not known, to the
// trace context the message arrived with).
func wrapBatchHandler[T any](t *tracer, pipe, name string, h batcher.Handler[T]) batcher.Handler[T] {
	stage := pipe + ".batcher." + name
	return func(ctx context.Context, batch []*message.Message[T], info message.BatchInfo) error {
		// The failed messages are counted in the batch as it came: h may
		// rewrite its slice (see batcher.Handler).
		msgs := slices.Clone(batch)
		links := make([]trace.Link, 0, len(batch))
		bs := &batchSpans[T]{msgs: msgs, scs: make([]trace.SpanContext, len(batch))}
		for i, m := range batch {
			sc, ok := t.linkOf(m)
			if ok {
				links = append(links, trace.Link{SpanContext: sc})
				bs.scs[i] = sc
			}
		}
		attrs := []attribute.KeyValue{
			AttrPipeline.String(pipe), AttrStage.String(stage), AttrBatcher.String(name),
			AttrBatchTrigger.String(info.Trigger.String()),
			attribute.Int("messaging.batch.message_count", len(batch)),
		}
		if info.BatchKey != "" {
			attrs = append(attrs, AttrBatchKey.String(info.BatchKey))
		}
		sctx, span := t.tracer.Start(ctx, stage,
			trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
			trace.WithAttributes(attrs...))
		sctx = context.WithValue(sctx, batchSpansKey{}, bs)
		done := false
		defer func() {
			if done {
				return
			}
			// The batch handler panicked (the batch processor recovers it:
			// the panic goes on, with its value) or ended its goroutine
			// (runtime.Goexit); either way the whole batch fails.
			r := recover()
			span.SetAttributes(AttrBatchFailed.Int(len(msgs)))
			span.SetStatus(codes.Error, abnormalEnd(r, "batch handler"))
			span.End()
			if r != nil {
				panic(r)
			}
		}()
		err := h(sctx, batch, info)
		done = true
		// A batch handler's error fails every message of the batch.
		failed := len(msgs)
		if err == nil {
			failed = 0
			for _, m := range msgs {
				if m.Failed() {
					failed++
				}
			}
		}
		span.SetAttributes(AttrBatchFailed.Int(failed))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return err
	}
}

// batchSpansKey is the context key of a batch handler's batchSpans.
type batchSpansKey struct{}

// batchSpans are the span contexts a batch span links to, one for each
// message of the batch as the batch handler was given it (zero when the
// message has none), for MessageContext.
type batchSpans[T any] struct {
	msgs []*message.Message[T]
	scs  []trace.SpanContext
	once sync.Once
	idx  map[*message.Message[T]]int // built on the first lookup in a large batch
}

// linearLookup is the batch size up to which MessageContext looks a
// message up by scanning the batch rather than through a map.
const linearLookup = 64

// of returns the span context of m, a message of the batch.
func (b *batchSpans[T]) of(m *message.Message[T]) (trace.SpanContext, bool) {
	if len(b.msgs) <= linearLookup {
		for i, x := range b.msgs {
			if x == m {
				return b.scs[i], b.scs[i].IsValid()
			}
		}
		return trace.SpanContext{}, false
	}
	b.once.Do(func() {
		b.idx = make(map[*message.Message[T]]int, len(b.msgs))
		for i, x := range b.msgs {
			b.idx[x] = i
		}
	})
	i, ok := b.idx[m]
	if !ok {
		return trace.SpanContext{}, false
	}
	return b.scs[i], b.scs[i].IsValid()
}

// MessageContext returns, in a batch handler that Instrument wrapped, ctx
// (the handler's context, or one derived from it) carrying as its span
// context the span the batch span links to for m, a message of the
// batch: the span of m's processor, or, when that is not known, the trace
// context m arrived with. What the handler does for that one message
// then joins the message's trace rather than the batch's: a publish
// through a topic sink with SinkHeaders carries the message's trace
// downstream, and a span the handler starts under it is a child of the
// message's span.
//
//	for _, m := range batch {
//		if err := s.Publish(tracing.MessageContext(ctx, m), m); err != nil {
//			m.Fail(err)
//		}
//	}
//
// It returns ctx unchanged when tracing is off, outside a batch handler
// that Instrument wrapped, for a message that is not of the batch, and
// for one without a span context. Safe to call from several goroutines
// of the handler at once.
func MessageContext[T any](ctx context.Context, m *message.Message[T]) context.Context {
	bs, ok := ctx.Value(batchSpansKey{}).(*batchSpans[T])
	if !ok || m == nil {
		return ctx
	}
	sc, ok := bs.of(m)
	if !ok {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

// abnormalEnd is the status description of the span of a handler (who)
// that did not return: r is what a recover in its deferred call gave, nil
// when it ended its goroutine (runtime.Goexit), since a panic's value,
// even panic(nil)'s, is never nil.
func abnormalEnd(r any, who string) string {
	if r != nil {
		return who + " panicked"
	}
	return who + " exited (runtime.Goexit)"
}

// linkOf is the span context a batch span links to for m: its processor
// span's, else the one it arrived with.
func (t *tracer) linkOf(m message.Keyed) (trace.SpanContext, bool) {
	if key, ok := linkKeyOf(m); ok {
		if sc, ok := t.links.take(key); ok {
			return sc, true
		}
	}
	ctx, _ := t.remote(context.Background(), m.SourceMetadata())
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// linkKey identifies a message while it is in flight: its acknowledger,
// the id it will be acknowledged with and, when it is a pointer, its ack
// data, which a processor's output message keeps (message.Transfer). The
// ack data tells apart the messages of a source that gives them all the
// same id (topic/topology's Source: id 0, a *record each).
type linkKey struct {
	ack  acker.Acknowledger
	id   uint64
	data any
}

type acknowledged interface {
	Acknowledger() (acker.Acknowledger, uint64, any)
}

// linkKeyOf is m's key, when its acknowledger is a pointer (which compares
// by identity and so can key a map safely) other than acker.Discard. Ack
// data that is not a pointer is left out of the key.
func linkKeyOf(m any) (linkKey, bool) {
	a, ok := m.(acknowledged)
	if !ok {
		return linkKey{}, false
	}
	ack, id, data := a.Acknowledger()
	if ack == nil || reflect.TypeOf(ack).Kind() != reflect.Pointer || ack == acker.Discard {
		return linkKey{}, false
	}
	if data != nil && reflect.TypeOf(data).Kind() != reflect.Pointer {
		data = nil // may not be comparable; a pointer always is
	}
	return linkKey{ack, id, data}, true
}

// linkTable remembers the span contexts of messages between their
// processor and their batch. It holds at most max entries in two
// generations: when the current one fills half, it becomes the previous
// one and the one before is dropped, so that entries of messages that
// never reached a batch (failed in the batcher, left unhandled by a cut
// drain) age out.
type linkTable struct {
	mu        sync.Mutex
	half      int
	keepPrev  bool // false when max is 1: one generation only
	cur, prev map[linkKey]trace.SpanContext
}

func newLinkTable(max int) *linkTable {
	if max <= 0 {
		max = DefaultMaxPending
	}
	half := max / 2
	if half < 1 {
		half = 1
	}
	return &linkTable{half: half, keepPrev: 2*half <= max, cur: make(map[linkKey]trace.SpanContext)}
}

func (l *linkTable) remember(k linkKey, sc trace.SpanContext) {
	l.mu.Lock()
	if len(l.cur) >= l.half {
		l.prev, l.cur = l.cur, make(map[linkKey]trace.SpanContext, l.half)
		if !l.keepPrev {
			l.prev = nil
		}
	}
	delete(l.prev, k)
	l.cur[k] = sc
	l.mu.Unlock()
}

func (l *linkTable) forget(k linkKey) {
	l.mu.Lock()
	delete(l.cur, k)
	delete(l.prev, k)
	l.mu.Unlock()
}

func (l *linkTable) take(k linkKey) (trace.SpanContext, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sc, ok := l.cur[k]; ok {
		delete(l.cur, k)
		return sc, true
	}
	if sc, ok := l.prev[k]; ok {
		delete(l.prev, k)
		return sc, true
	}
	return trace.SpanContext{}, false
}

// size is the number of remembered span contexts.
func (l *linkTable) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cur) + len(l.prev)
}
