package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/sources/pulsar"
)

// PulsarSource is what the Observer reads of a Pulsar source:
// *pulsar.Source implements it.
type PulsarSource interface {
	Stats() pulsar.Stats
}

type namedPulsar struct {
	subscription string
	s            PulsarSource
	g            *guard[pulsar.Stats]
}

const lSubscription = "subscription"

var (
	pulsarConsumers    = desc("pulsar_consumers", "Consumers the source has open.", lSubscription)
	pulsarReceived     = desc("pulsar_messages_received_total", "Messages the source took from the client and delivered to its stages.", lSubscription)
	pulsarRedelivered  = desc("pulsar_messages_redelivered_total", "Received messages the broker had delivered before (redelivery count above 0).", lSubscription)
	pulsarAcked        = desc("pulsar_messages_acked_total", "Messages the source handed to the client to acknowledge: handled, or failed and discarded.", lSubscription)
	pulsarNacked       = desc("pulsar_messages_nacked_total", "Messages the source asked the broker to redeliver.", lSubscription)
	pulsarDeadLettered = desc("pulsar_messages_dead_lettered_total", "Messages the client routed to the dead-letter topic.", lSubscription)
	pulsarDroppedAcks  = desc("pulsar_acks_dropped_total", "Outcomes dropped because their consumer had been closed or replaced, or its ack queue was full while the client took no acks; the broker redelivers those messages.", lSubscription)
	pulsarReplaced     = desc("pulsar_consumers_replaced_total", "Consumers closed because their stage failed and was restarted.", lSubscription)
	pulsarGranted      = desc("pulsar_permits_granted_total", "Permits the stages' feeds granted the consumers.", lSubscription)
	pulsarAvailable    = desc("pulsar_permits_available", "Granted permits the open consumers have not used yet.", lSubscription)
	pulsarClientQueue  = desc("pulsar_client_queue_messages", "Messages the clients of the open consumers may hold or be owed by the broker beyond what the source took.", lSubscription)
	pulsarPanics       = desc("pulsar_callback_panics_total", "Panics recovered from the active-state callback.", lSubscription)
	pulsarReconnects   = desc("pulsar_reconnect_failures_total", "Failed attempts of the subscription's consumers to reconnect to a broker after their connection closed.", lSubscription)
	pulsarAbandoned    = desc("pulsar_subscribes_abandoned_total", "Subscribe calls of the client the source stopped waiting for after its subscribe timeout; each failed its stage.", lSubscription)
)

var pulsarDescs = []*prometheus.Desc{pulsarConsumers, pulsarReceived, pulsarRedelivered, pulsarAcked, pulsarNacked, pulsarDeadLettered,
	pulsarDroppedAcks, pulsarReplaced, pulsarGranted, pulsarAvailable, pulsarClientQueue, pulsarPanics, pulsarReconnects, pulsarAbandoned}

// AddPulsar adds a Pulsar source under its subscription's name: its
// consumers, deliveries, redeliveries, nacks, dead letters, dropped acks
// and permits become metrics labelled subscription=subscription. The
// source's pipeline must be added with Add for its health to count. A
// subscription already added is refused with an error wrapping
// ErrDuplicate; an empty subscription, or a nil s (or nil pointer), with
// an error wrapping ErrInvalid. AddPulsar reads no Stats, and does not
// block; once Close is called, it returns ErrClosed.
func (o *Observer) AddPulsar(subscription string, s PulsarSource) error {
	return addNamed(o, &o.pulsar, "Pulsar subscription", subscription, s, pulsarSubscription,
		namedPulsar{subscription: subscription, s: s, g: new(guard[pulsar.Stats])})
}

// RemovePulsar removes the Pulsar source added under subscription, and
// reports whether there was one.
func (o *Observer) RemovePulsar(subscription string) bool {
	return removeNamed(o, &o.pulsar, subscription, pulsarSubscription)
}

func pulsarSubscription(p namedPulsar) string { return p.subscription }

func collectPulsar(ch chan<- prometheus.Metric, sub string, st pulsar.Stats) {
	gauge(ch, pulsarConsumers, float64(st.Consumers), sub)
	counter(ch, pulsarReceived, float64(st.Received), sub)
	counter(ch, pulsarRedelivered, float64(st.Redelivered), sub)
	counter(ch, pulsarAcked, float64(st.Acked), sub)
	counter(ch, pulsarNacked, float64(st.Nacked), sub)
	counter(ch, pulsarDeadLettered, float64(st.DeadLettered), sub)
	counter(ch, pulsarDroppedAcks, float64(st.DroppedAcks), sub)
	counter(ch, pulsarReplaced, float64(st.Replaced), sub)
	counter(ch, pulsarGranted, float64(st.PermitsGranted), sub)
	gauge(ch, pulsarAvailable, float64(st.PermitsAvailable), sub)
	gauge(ch, pulsarClientQueue, float64(st.ClientQueue), sub)
	counter(ch, pulsarPanics, float64(st.CallbackPanics), sub)
	counter(ch, pulsarReconnects, float64(st.ReconnectFailures), sub)
	counter(ch, pulsarAbandoned, float64(st.SubscribesAbandoned), sub)
}

// PulsarSnapshot is one Pulsar source's pulsar.Stats, with the
// subscription it was added under.
type PulsarSnapshot struct {
	// Subscription is the subscription the source was added under.
	Subscription string `json:"subscription"`
	pulsar.Stats
}
