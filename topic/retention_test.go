package topic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: an in-memory subscription keeps none of the values it
// delivered once they are acknowledged.
func TestSubscriptionsKeepNoSettledValue(t *testing.T) {
	topictest.RunRetention(t, func(*testing.T) topic.Backend[[]byte] { return topic.InMemory[[]byte]{} })
}
