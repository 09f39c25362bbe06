package kafkatopology

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: a sarama Config that sarama itself refuses is an error that
// names the field once and says sarama refused it, with sarama's reason:
// "kafkatopology.config is rejected by sarama: kafka: invalid
// configuration (…)".
func TestSaramaRefusalNamesTheConfigOnce(t *testing.T) {
	bad := sarama.NewConfig()
	bad.Consumer.Fetch.Min = 0
	o := Options[topologytest.Msg]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.JSONCodec[topologytest.Msg]{}, Config: bad}
	err := o.WithDefaults().Validate()
	var ve validate.Errors
	if !errors.As(err, &ve) || len(ve) != 1 || ve[0].Field != "kafkatopology.config" {
		t.Fatalf("Validate = %v, want one error on kafkatopology.config", err)
	}
	const want = "kafkatopology.config is rejected by sarama: kafka: invalid configuration ("
	if msg := ve[0].Message; !strings.HasPrefix(msg, want) || !strings.Contains(msg, "Consumer.Fetch.Min") {
		t.Fatalf("message %q, want it to start %q and give sarama's reason", msg, want)
	}
}
