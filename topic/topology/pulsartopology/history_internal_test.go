package pulsartopology

import (
	"testing"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a message another producer wrote decodes to the history its
// properties carry, or does not decode when a history property holds a
// value no letter carries, as a Kafka record with the same headers does.
func TestPropertiesAnotherProducerWroteReadAsKafkaHeadersDo(t *testing.T) {
	keys := topologytest.HistoryKeys{Shard: PropShard, Retries: PropRetries, FirstFailure: PropFirstFailure,
		LastFailure: PropLastFailure, Resume: PropResume, Group: PropGroup,
		DeathReason: PropDeathReason, DeathError: PropDeathError, DeathTopic: PropDeathTopic, DeathGroup: PropDeathGroup,
		DeathRetries: PropDeathRetries, DeathFirstFailure: PropDeathFirstFailure, DeathLastFailure: PropDeathLastFailure,
		ResumeTrue: "true", ResumeFalse: "false"}
	topologytest.CheckHistory(t, keys, func(entries []string) (topology.Letter[topologytest.Msg], string, error) {
		// pulsar-client-go hands the properties over as a map: of a
		// repeated key the last counts.
		var p map[string]string
		for i := 0; i < len(entries); i += 2 {
			if p == nil {
				p = make(map[string]string)
			}
			p[entries[i]] = entries[i+1]
		}
		var l topology.Letter[topologytest.Msg]
		group, err := readProperties(p, &l)
		return l, group, err
	})
}
