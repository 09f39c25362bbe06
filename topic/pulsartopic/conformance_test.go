package pulsartopic_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
	"github.com/boulevard-go/boulevard/topic/topictest"
)

// Guarantee: the backend passes the topic conformance suite on an
// in-process broker, every subtest passing or skipped by a capability it
// does not declare.
//
// The subtests share one broker and one client, each with its topics in a
// namespace of its own, so that the client's connections close once, after
// the last subtest, rather than under each subtest's consumers.
func TestConformance(t *testing.T) {
	b := testbroker.Pulsar(t)
	client := testClient(t, b)
	var n atomic.Int32
	topictest.RunWith(t, func(t *testing.T) topic.Backend[int] {
		o := testOptions[int](b, topic.IntCodec{})
		o.ServiceURL, o.Client = "", client
		o.Namespace = fmt.Sprintf("conformance-%d", n.Add(1))
		return newBackend(t, o)
	})
}

var _ topic.Backend[int] = (*pulsartopic.Backend[int])(nil)
