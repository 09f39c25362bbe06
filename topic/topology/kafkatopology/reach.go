package kafkatopology

import (
	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkareach"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/internal/reachrelay"
)

// reach is what a reader learns of whether it can read from the cluster,
// by the Kafka source's rule (rule, see kafkareach.Reach), kept for the
// observer its subscriber sets (ReportReach).
type reach struct {
	rule  kafkareach.Reach // reports to relay
	relay reachrelay.Relay
}

// newReach returns the reach of a reader whose client is configured with
// cfg: it hears each response the client reads (kafkareach.Reach.Heard)
// through cfg's MetricRegistry, which it wraps.
func newReach(cfg *sarama.Config) *reach {
	r := &reach{}
	r.rule.Health = &r.relay
	cfg.MetricRegistry = kafkareach.NewHeardRegistry(cfg.MetricRegistry, r.rule.Heard)
	return r
}

// ReportReach implements topology.ReachReporter: o hears when the reader
// cannot read from the cluster and when it reads again (see
// Queues.Subscribe).
func (r *reach) ReportReach(o topic.ReachObserver) { r.relay.Set(o) }
