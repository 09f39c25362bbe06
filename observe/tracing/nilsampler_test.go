package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/boulevard-go/boulevard/observe/tracing"
)

// TestSampleLinkedOfNilLeavesTheDecisionsToTheSDKDefault checks that
// SampleLinked(nil) samples as the SDK's default sampler does (a root span
// without links is sampled), instead of panicking when a span starts.
func TestSampleLinkedOfNilLeavesTheDecisionsToTheSDKDefault(t *testing.T) {
	s := tracing.SampleLinked(nil)
	want := sdktrace.ParentBased(sdktrace.AlwaysSample())
	if got := s.Description(); got != "SampleLinked{"+want.Description()+"}" {
		t.Errorf("Description = %q", got)
	}
	res := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), Name: "root"})
	if res.Decision != sdktrace.RecordAndSample {
		t.Errorf("a root span without links: decision %v, want RecordAndSample", res.Decision)
	}
}
