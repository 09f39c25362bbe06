package kafkatopic_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: a sarama Config that sarama itself refuses is an error that
// names the field once and says sarama refused it, with sarama's reason:
// "config is rejected by sarama: kafka: invalid configuration (…)", the
// wording of the Kafka source's "kafka.config is rejected by sarama: …".
func TestSaramaRefusalNamesTheConfigOnce(t *testing.T) {
	bad := sarama.NewConfig()
	bad.Consumer.Fetch.Min = 0
	err := kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}, Config: bad}.Validate()
	var ve validate.Errors
	if !errors.As(err, &ve) || len(ve) != 1 || ve[0].Field != "config" {
		t.Fatalf("Validate = %v, want one error on config", err)
	}
	const want = "config is rejected by sarama: kafka: invalid configuration ("
	if msg := ve[0].Message; !strings.HasPrefix(msg, want) || !strings.Contains(msg, "Consumer.Fetch.Min") {
		t.Fatalf("message %q, want it to start %q and give sarama's reason", msg, want)
	}
}
