package kafkatopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// The Kafka backend passes the topic layer's conformance suite, each
// subtest on a fresh in-process cluster, skipping only what its
// capabilities leave out.
func TestConformance(t *testing.T) {
	topictest.RunWith(t, func(t *testing.T) topic.Backend[int] {
		return newBackend(t, testOptions[int](testbroker.Kafka(t), topic.IntCodec{}))
	})
}
