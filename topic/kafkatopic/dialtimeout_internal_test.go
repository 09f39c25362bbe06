package kafkatopic

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: ConnectTimeout is the clients' dial timeout, unless Config
// sets a lower one, which is kept.
func TestConnectTimeoutBoundsTheDialTimeout(t *testing.T) {
	o := Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}, ConnectTimeout: 3 * time.Second}
	if got := o.WithDefaults().saramaConfig().Net.DialTimeout; got != 3*time.Second {
		t.Errorf("Net.DialTimeout with sarama's defaults = %s, want ConnectTimeout 3s", got)
	}
	o.Config = sarama.NewConfig()
	o.Config.Net.DialTimeout = time.Second
	if got := o.WithDefaults().saramaConfig().Net.DialTimeout; got != time.Second {
		t.Errorf("Net.DialTimeout with Config's 1s and ConnectTimeout 3s = %s, want Config's 1s", got)
	}
}
