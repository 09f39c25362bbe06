package pulsartopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: Backend.NewTopic and Backend.Close return an error matching
// topic.ErrNilContext for a nil context, rather than panicking: no topic
// is made, and Close leaves the backend open, still declaring topics.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	be := newBackend(t, testOptions[int](testbroker.Pulsar(t), topic.IntCodec{}))
	topictest.NilContextRefused(t, be, be.Close)
}
