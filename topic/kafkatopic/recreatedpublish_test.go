package kafkatopic_test

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a Kafka topic deleted and created again (same partitions)
// under a running backend, with the idempotent producer (acks all), takes
// the next publish: the broker has no sequence of the producer for the new
// partition and refuses the first batch without storing it, and the
// producer sends that batch again. The first publish after the topic is
// created again succeeds and the new partition holds each record once, in
// the order published.
func TestAPublishToATopicDeletedAndCreatedAgainIsStoredOnce(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	h := newTopic(t, newBackend(t, o), "recreated", topic.Options{})
	for v := range 3 {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	admin := testbroker.Admin(t, c.ListenAddrs())
	if err := admin.DeleteTopic("recreated"); err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic("recreated", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	const n = 5
	for v := range n {
		if err := h.Publish(ctxT(t), 10+v); err != nil {
			t.Fatalf("Publish(%d) to the topic created again: %v", 10+v, err)
		}
	}
	var got []int
	for _, r := range testbroker.Log(t, c.ListenAddrs(), "recreated") {
		v, err := topic.IntCodec{}.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v-10)
	}
	testbroker.OnceInOrder(t, "records published to the topic created again", got, n)
}
