package topic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// The in-memory backend passes the whole conformance suite.
func TestInMemoryConformance(t *testing.T) {
	topictest.Run(t, func() topic.Backend[int] { return topic.InMemory[int]{} })
}
