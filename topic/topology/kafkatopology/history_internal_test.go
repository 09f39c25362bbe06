package kafkatopology

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// historyKeys are the headers a letter's history is written in.
var historyKeys = topologytest.HistoryKeys{Shard: HeaderShard, Retries: HeaderRetries, FirstFailure: HeaderFirstFailure,
	LastFailure: HeaderLastFailure, Resume: HeaderResume, Group: HeaderGroup,
	DeathReason: HeaderDeathReason, DeathError: HeaderDeathError, DeathTopic: HeaderDeathTopic, DeathGroup: HeaderDeathGroup,
	DeathRetries: HeaderDeathRetries, DeathFirstFailure: HeaderDeathFirstFailure, DeathLastFailure: HeaderDeathLastFailure,
	ResumeTrue: "1", ResumeFalse: "0"}

// Guarantee: a record another producer wrote decodes to the history its
// headers carry, or does not decode when a history header holds a value no
// letter carries, as a Pulsar message with the same properties does.
func TestHeadersAnotherProducerWroteReadAsPulsarPropertiesDo(t *testing.T) {
	topologytest.CheckHistory(t, historyKeys, func(entries []string) (topology.Letter[topologytest.Msg], string, error) {
		rec := &sarama.ConsumerMessage{Topic: "t"}
		for i := 0; i < len(entries); i += 2 {
			rec.Headers = append(rec.Headers, &sarama.RecordHeader{Key: []byte(entries[i]), Value: []byte(entries[i+1])})
		}
		var l topology.Letter[topologytest.Msg]
		m, err := readHeaders(rec, &l)
		return l, m.group, err
	})
}
