package kafkatopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: a Kafka subscription keeps none of the values it delivered
// once they are acknowledged: neither its read-ahead nor its table of
// pending deliveries holds them.
func TestSubscriptionsKeepNoSettledValue(t *testing.T) {
	topictest.RunRetention(t, func(t *testing.T) topic.Backend[[]byte] {
		return newBackend(t, testOptions[[]byte](testbroker.Kafka(t), topic.BytesCodec{}))
	})
}
