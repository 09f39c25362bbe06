package kafka

import (
	metrics "github.com/rcrowley/go-metrics"
)

// responseRate is the name of the meter sarama's brokers mark once for
// each response they read, from any broker and for any request (fetches
// and heartbeats included), shared by the brokers of a client.
const responseRate = "response-rate"

// heardRegistry is a member's Config.MetricRegistry: the registry it
// wraps (the user's, or sarama's default), whose response-rate meter,
// as the member's brokers take it, also calls heard for each response.
// A registry of its own per member, so that a member hears only its own
// client's responses, even when the user shares one registry between
// members or clients. It calls heard whatever metrics.UseNilMetrics
// says: sarama then hands out meters that count nothing, which the
// wrapper still wraps.
type heardRegistry struct {
	metrics.Registry
	heard func()
}

// newHeardRegistry wraps parent (nil: a new registry) for a member whose
// heard is called for each response its brokers read.
func newHeardRegistry(parent metrics.Registry, heard func()) metrics.Registry {
	if parent == nil {
		parent = metrics.NewRegistry()
	}
	return &heardRegistry{Registry: parent, heard: heard}
}

// GetOrRegister is the wrapped registry's, but for the response-rate
// meter, which it wraps in a heardMeter.
func (r *heardRegistry) GetOrRegister(name string, metric any) any {
	got := r.Registry.GetOrRegister(name, metric)
	if name != responseRate {
		return got
	}
	if m, ok := got.(metrics.Meter); ok {
		return heardMeter{Meter: m, heard: r.heard}
	}
	return got
}

// heardMeter is a meter that calls heard each time it is marked.
type heardMeter struct {
	metrics.Meter
	heard func()
}

// Mark marks the wrapped meter, then calls heard.
func (m heardMeter) Mark(n int64) {
	m.Meter.Mark(n)
	m.heard()
}
