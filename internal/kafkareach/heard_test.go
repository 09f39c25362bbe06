package kafkareach

import (
	"testing"

	metrics "github.com/rcrowley/go-metrics"
)

// Guarantee: of the meters a reader's client takes from its registry,
// only the response-rate meter calls heard when marked, and each meter
// still counts in the registry it wraps (the user's metrics stay right).
func TestHeardRegistryHearsOnlyResponsesAndKeepsTheirCounts(t *testing.T) {
	parent := metrics.NewRegistry()
	heard := 0
	reg := NewHeardRegistry(parent, func() { heard++ })
	reg.GetOrRegister("request-rate", metrics.NewMeter).(metrics.Meter).Mark(1)
	if heard != 0 {
		t.Fatalf("marking request-rate called heard %d times, want 0", heard)
	}
	responses := reg.GetOrRegister(responseRate, metrics.NewMeter).(metrics.Meter)
	responses.Mark(1)
	responses.Mark(1)
	if heard != 2 {
		t.Fatalf("marking response-rate twice called heard %d times, want 2", heard)
	}
	if n := parent.Get(responseRate).(metrics.Meter).Snapshot().Count(); n != 2 {
		t.Fatalf("the wrapped registry's response-rate counts %d, want 2", n)
	}
	if n := parent.Get("request-rate").(metrics.Meter).Snapshot().Count(); n != 1 {
		t.Fatalf("the wrapped registry's request-rate counts %d, want 1", n)
	}
}

// Guarantee: without a registry of the user's, the reader's registry is
// a new one whose response-rate meter still calls heard.
func TestHeardRegistryWithoutAParentStillHears(t *testing.T) {
	heard := 0
	reg := NewHeardRegistry(nil, func() { heard++ })
	reg.GetOrRegister(responseRate, metrics.NewMeter).(metrics.Meter).Mark(1)
	if heard != 1 {
		t.Fatalf("marking response-rate called heard %d times, want 1", heard)
	}
}
