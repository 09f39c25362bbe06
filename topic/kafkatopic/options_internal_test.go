package kafkatopic

import (
	"testing"

	"github.com/IBM/sarama"
)

// Guarantee: Acks sets how many replicas store a record before the broker
// acknowledges it: all (the default) every in-sync replica, leader the
// partition leader only, none no answer.
func TestAcksSetTheProducersRequiredAcks(t *testing.T) {
	for acks, want := range map[string]sarama.RequiredAcks{
		"": sarama.WaitForAll, AcksAll: sarama.WaitForAll, AcksLeader: sarama.WaitForLocal, AcksNone: sarama.NoResponse,
	} {
		o := Options[int]{Acks: acks}.WithDefaults()
		if got := o.saramaConfig().Producer.RequiredAcks; got != want {
			t.Errorf("Acks %q: RequiredAcks %d, want %d", acks, got, want)
		}
	}
}
