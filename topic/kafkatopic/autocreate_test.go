package kafkatopic_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: on a cluster that creates the topics a client asks for
// (Kafka's auto.create.topics.enable, true by default), a Kafka topic
// deleted under a running backend is not created again by a Publish or by
// a subscriber's lookups with the broker's defaults: the Publish fails
// with an error naming the topic and the topic stays absent, however
// often the subscriber looks it up, until a backend declares it again
// with its configured partitions.
func TestAPublishToADeletedTopicFailsNamingItAndDoesNotCreateItAgain(t *testing.T) {
	c := testbroker.Kafka(t, kfake.AllowAutoTopicCreation())
	o := testOptions[int](c, topic.IntCodec{})
	o.Partitions = 3 // not the broker's default partition count
	o.Key = func(v int) []byte { return []byte(strconv.Itoa(v)) }
	h := newTopic(t, newBackend(t, o), "gone", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	roundTrip(t, h, s, 1)
	lookups := countLookups(c, "gone")
	admin := testbroker.Admin(t, c.ListenAddrs())
	exists := func() (sarama.TopicDetail, bool) {
		t.Helper()
		topics, err := admin.ListTopics()
		if err != nil {
			t.Fatal(err)
		}
		d, ok := topics["gone"]
		return d, ok
	}
	if err := admin.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	// The subscriber's member keeps looking the topic up.
	seen := lookups.Load()
	wait.Within(t, patience, "more lookups of the deleted topic", func() bool {
		_, ok := exists()
		return ok || lookups.Load() >= seen+20
	})
	if d, ok := exists(); ok {
		t.Fatalf("topic %q exists again after the subscriber's lookups, with %d partition(s)", "gone", d.NumPartitions)
	}
	if err := h.Publish(ctxT(t), 2); err == nil || !strings.Contains(err.Error(), `"gone"`) ||
		!errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Fatalf("Publish to the deleted topic = %v, want an error naming it and wrapping ErrUnknownTopicOrPartition", err)
	}
	if d, ok := exists(); ok {
		t.Fatalf("topic %q exists again after a publish to it, with %d partition(s)", "gone", d.NumPartitions)
	}
	newTopic(t, newBackend(t, o), "gone", topic.Options{})
	if d, _ := exists(); d.NumPartitions != o.Partitions {
		t.Fatalf("topic declared again has %d partition(s), want %d", d.NumPartitions, o.Partitions)
	}
	wait.Within(t, patience, "a publish to the topic declared again to be stored", func() bool {
		return h.Publish(ctxT(t), 3) == nil
	})
}
