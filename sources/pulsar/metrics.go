package pulsar

import "github.com/prometheus/client_golang/prometheus"

// Metric labels: the pipeline name the collector was made for, and the
// source's subscription.
var pulsarLabels = []string{"pipeline", "subscription"}

func pulsarDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("boulevard_pulsar_"+name, help, pulsarLabels, nil)
}

var (
	mConsumers   = pulsarDesc("consumers", "Consumers the source has open.")
	mReplaced    = pulsarDesc("consumers_replaced_total", "Consumers closed because their producer stage failed and was restarted.")
	mReceived    = pulsarDesc("received_total", "Messages taken from the client and delivered to the producer stages.")
	mRedelivered = pulsarDesc("redelivered_total", "Received messages the broker had delivered before (redelivery count above 0).")
	mNacked      = pulsarDesc("nacked_total", "Messages the source asked the broker to redeliver.")
	mDeadLetters = pulsarDesc("dead_lettered_total", "Messages the client routed to the dead-letter topic instead of delivering them.")
	mDropped     = pulsarDesc("dropped_acks_total", "Outcomes dropped because their consumer was closed or replaced; the broker redelivers those messages.")
	mPanics      = pulsarDesc("callback_panics_total", "Panics recovered from the active state callback.")
	mGranted     = pulsarDesc("permits_granted_total", "Permits the producer stages' feeds granted the consumers.")
	mAvailable   = pulsarDesc("permits_available", "Permits the open consumers have not used yet.")
	mClientQueue = pulsarDesc("client_queue_messages", "Messages the clients of the open consumers may hold or be owed by the broker beyond what the source took.")
)

var pulsarDescs = []*prometheus.Desc{mConsumers, mReplaced, mReceived, mRedelivered, mNacked, mDeadLetters,
	mDropped, mPanics, mGranted, mAvailable, mClientQueue}

// Collector returns a prometheus.Collector of the source's Stats, its
// series labelled pipeline (the name given) and subscription. It reads a
// snapshot only when scraped, so the message path pays nothing for it.
// Register it on a prometheus.Registerer of your choice, beside the
// pipeline's metrics (package observe); register one collector per
// source, with distinct pipeline names.
func (s *Source) Collector(pipeline string) prometheus.Collector {
	return &collector{src: s, labels: []string{pipeline, s.opts.Subscription}}
}

type collector struct {
	src    *Source
	labels []string
}

// Describe sends the descriptions of the source's metrics.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range pulsarDescs {
		ch <- d
	}
}

// Collect sends the source's Stats as metrics.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	for _, m := range []struct {
		d    *prometheus.Desc
		kind prometheus.ValueType
		v    float64
	}{
		{mConsumers, prometheus.GaugeValue, float64(st.Consumers)},
		{mReplaced, prometheus.CounterValue, float64(st.Replaced)},
		{mReceived, prometheus.CounterValue, float64(st.Received)},
		{mRedelivered, prometheus.CounterValue, float64(st.Redelivered)},
		{mNacked, prometheus.CounterValue, float64(st.Nacked)},
		{mDeadLetters, prometheus.CounterValue, float64(st.DeadLettered)},
		{mDropped, prometheus.CounterValue, float64(st.DroppedAcks)},
		{mPanics, prometheus.CounterValue, float64(st.CallbackPanics)},
		{mGranted, prometheus.CounterValue, float64(st.PermitsGranted)},
		{mAvailable, prometheus.GaugeValue, float64(st.PermitsAvailable)},
		{mClientQueue, prometheus.GaugeValue, float64(st.ClientQueue)},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, m.kind, m.v, c.labels...)
	}
}
