package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/boulevard-go/boulevard/observe/tracing"
)

var decisions = map[sdktrace.SamplingDecision]string{sdktrace.Drop: "drop", sdktrace.RecordOnly: "record only", sdktrace.RecordAndSample: "record and sample"}

// Guarantee: SampleLinked records and samples (so exports) a root span
// linked to a sampled span, and leaves to the sampler it wraps a root
// whose links are all unsampled and a span that has a parent, sampled
// links or not.
func TestSampleLinkedSamplesOnlyRootsLinkedToASampledSpan(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}})
	s := tracing.SampleLinked(sdktrace.ParentBased(sdktrace.NeverSample()))
	for name, tc := range map[string]struct {
		parent trace.SpanContext
		links  []trace.SpanContext
		want   sdktrace.SamplingDecision
	}{
		"root linked to a sampled span":  {trace.SpanContext{}, []trace.SpanContext{unsampled, sampled}, sdktrace.RecordAndSample},
		"root linked to unsampled spans": {trace.SpanContext{}, []trace.SpanContext{unsampled}, sdktrace.Drop},
		"child of an unsampled parent":   {unsampled, []trace.SpanContext{sampled}, sdktrace.Drop},
		"child of a sampled parent":      {sampled, nil, sdktrace.RecordAndSample},
	} {
		p := sdktrace.SamplingParameters{ParentContext: trace.ContextWithSpanContext(context.Background(), tc.parent), TraceID: trace.TraceID{3}, Name: "span"}
		for _, l := range tc.links {
			p.Links = append(p.Links, trace.Link{SpanContext: l})
		}
		if got := s.ShouldSample(p).Decision; got != tc.want {
			t.Errorf("%s: decision %s, want %s", name, decisions[got], decisions[tc.want])
		}
	}
}
