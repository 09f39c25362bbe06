package tracing_test

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/propagation"

	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: WithDefaults gives each zero field its documented default
// (TracerProvider stays nil: off; MaxPending 65536, as
// docs/observability.md says) and keeps what is set; Validate names
// a MaxPending out of bounds (below 0, above 1<<24), as Instrument
// reports it, and accepts 1<<24 itself.
func TestOptionsDefaultsAndValidate(t *testing.T) {
	d := tracing.Options{}.WithDefaults()
	if d.TracerProvider != nil || d.Propagator == nil || d.Carrier == nil || d.MaxPending != 1<<16 {
		t.Fatalf("WithDefaults() = %+v, want the default propagator, carrier and MaxPending 65536, no provider", d)
	}
	if _, ok := d.Propagator.(propagation.TraceContext); !ok {
		t.Fatalf("default Propagator %T, want propagation.TraceContext", d.Propagator)
	}
	baggage := propagation.Baggage{}
	s := tracing.Options{Propagator: baggage, MaxPending: 8}.WithDefaults()
	if s.Propagator != baggage || s.MaxPending != 8 {
		t.Fatalf("WithDefaults() = %+v, replaced a field that was set", s)
	}
	var errs validate.Errors
	if err := (tracing.Options{MaxPending: 1<<24 + 1}).Validate(); !errors.As(err, &errs) || !errs.Has("tracing.maxPending", "lte") {
		t.Fatalf("Validate() = %v, want tracing.maxPending lte", err)
	}
	if err := (tracing.Options{MaxPending: 1 << 24}).Validate(); err != nil {
		t.Fatalf("MaxPending at its bound 1<<24 refused: %v", err)
	}
	if err := (tracing.Options{MaxPending: -1}).Validate(); !errors.As(err, &errs) || !errs.Has("tracing.maxPending", "gte") {
		t.Fatalf("Validate() = %v, want tracing.maxPending gte", err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}
