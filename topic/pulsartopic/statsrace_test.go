package pulsartopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
)

// Guarantee: a topic's Stats may be read from several goroutines while
// subscribers of several groups and broadcast subscribers subscribe and
// close, and while the topic closes (run with -race); once every
// subscriber closed, they count none.
func TestStatsMayBeReadWhileSubscribersComeAndGoAndTheTopicCloses(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	readertest.StatsWhileSubscribersChurn(t, ctxT(t), newHandle(t, be, "stats-race", topic.Options{Mode: topic.Mixed}))
}
