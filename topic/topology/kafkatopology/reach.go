package kafkatopology

import (
	"errors"

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

// partitionError notes err, the error a partition consumer of the
// reader's client reported (kafkareach.Reach.SaramaError), and degrades
// at once when an ACL refuses the fetch (sarama.ErrTopicAuthorizationFailed):
// retrying does not heal it, and the reader's session, which may stay up
// meanwhile, reads nothing until READ is granted back. An answer from the
// cluster ends that only once the refusals have stopped
// (kafkareach.Reach.Heard), or records coming in do.
func (r *reach) partitionError(err error) {
	if errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		r.rule.Unreachable(err)
		return
	}
	r.rule.SaramaError(err)
}
