package kafkareach

import (
	metrics "github.com/rcrowley/go-metrics"
)

// responseRate is the name of the meter sarama's brokers mark once for
// each response they read, from any broker and for any request (fetches
// and heartbeats included), shared by the brokers of a client.
const responseRate = "response-rate"

// heardRegistry is a reader's Config.MetricRegistry: the registry it
// wraps (the user's, or sarama's default), whose response-rate meter,
// as the reader's brokers take it, also calls heard for each response.
// A registry of its own per reader, so that a reader hears only its own
// client's responses, even when the user shares one registry between
// readers or clients. It calls heard whatever metrics.UseNilMetrics
// says: sarama then hands out meters that count nothing, which the
// wrapper still wraps.
type heardRegistry struct {
	metrics.Registry
	heard func()
}

// NewHeardRegistry wraps parent (nil: a new registry) for the sarama
// client of one reader, whose heard (Reach.Heard) is called for each
// response the client's brokers read. Set it as the client's
// Config.MetricRegistry: sarama's brokers mark its response-rate meter
// once per response, from any broker and for any request (fetches and
// heartbeats included).
func NewHeardRegistry(parent metrics.Registry, heard func()) metrics.Registry {
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
