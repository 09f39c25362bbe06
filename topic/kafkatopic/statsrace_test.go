package kafkatopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
)

// Guarantee: a topic's Stats may be read from several goroutines while
// members of several groups and broadcast subscribers subscribe and
// close, and while the topic closes (run with -race); once every
// subscriber closed, they count none.
func TestStatsMayBeReadWhileSubscribersComeAndGoAndTheTopicCloses(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
	readertest.StatsWhileSubscribersChurn(t, ctxT(t), newTopic(t, b, "stats-race", topic.Options{Mode: topic.Mixed}))
}
