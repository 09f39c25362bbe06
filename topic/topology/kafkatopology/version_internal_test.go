package kafkatopology

import (
	"testing"

	"github.com/IBM/sarama"
)

// Guarantee: the backend's clients speak at least Kafka 0.11's protocol,
// the first with record headers, which carry a letter's history: a Config
// asking for an older version gets sarama's default one, a newer one is
// kept, and the Config given is not modified.
func TestClientsSpeakAProtocolWithRecordHeaders(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.V0_10_2_0, sarama.V0_8_2_0} {
		c := sarama.NewConfig()
		c.Version = v
		o := connectOptions("127.0.0.1:9092")
		o.Config = c
		got := o.WithDefaults().saramaConfig().Version
		if !got.IsAtLeast(sarama.V0_11_0_0) {
			t.Errorf("with Config.Version %s the clients speak %s, want at least 0.11 (record headers)", v, got)
		}
		if c.Version != v {
			t.Errorf("the Config given has version %s after use, want its own %s", c.Version, v)
		}
	}
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	o := connectOptions("127.0.0.1:9092")
	o.Config = c
	if got := o.WithDefaults().saramaConfig().Version; got != sarama.V3_6_0_0 {
		t.Errorf("with Config.Version 3.6.0 the clients speak %s, want 3.6.0", got)
	}
}
