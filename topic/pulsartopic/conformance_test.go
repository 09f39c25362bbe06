package pulsartopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: the backend passes the topic conformance suite on an
// in-process broker, every subtest passing or skipped by a capability it
// does not declare.
func TestConformance(t *testing.T) {
	topictest.RunWith(t, func(t *testing.T) topic.Backend[int] {
		return newBackend(t, testOptions[int](testbroker.Pulsar(t), topic.IntCodec{}))
	})
}

var _ topic.Backend[int] = (*pulsartopic.Backend[int])(nil)
