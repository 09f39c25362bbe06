package kafkatopic_test

import (
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

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
	testbroker.OnceInOrder(t, "records published to the topic created again", storedFrom(t, c, "recreated", 10), n)
}

// Guarantee: a Kafka topic deleted and created again several times under a
// running backend takes every publish after each re-creation, the first
// included. The batching producer's batch is refused as out of order each
// time; so, from the second re-creation on, is its resend through the
// single-record producer, which has sequences of its own for the
// partition, and the record is sent once more through a producer with no
// sequences. The topic holds each record published after the last
// re-creation once, in the order published, and each producer interceptor
// of Options.Config ran once on every record, those sent again included.
func TestPublishAfterATopicIsCreatedAgainSeveralTimesSucceeds(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	st := newStamp()
	o.Config.Producer.Interceptors = []sarama.ProducerInterceptor{st}
	h := newTopic(t, newBackend(t, o), "recreated", topic.Options{})
	admin := testbroker.Admin(t, c.ListenAddrs())
	const n = 4
	for round := range 4 {
		if round > 0 {
			if err := admin.DeleteTopic("recreated"); err != nil {
				t.Fatal(err)
			}
			if err := admin.CreateTopic("recreated", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
				t.Fatal(err)
			}
		}
		for v := range n {
			if err := h.Publish(ctxT(t), 100*round+v); err != nil {
				t.Fatalf("Publish(%d) after the topic was created again %d times: %v", 100*round+v, round, err)
			}
			b, err := topic.IntCodec{}.Encode(100*round + v)
			if err != nil {
				t.Fatal(err)
			}
			if n := st.callsOn(string(b)); n != 1 {
				t.Fatalf("the interceptor ran %d times on record %d, want once", n, 100*round+v)
			}
		}
	}
	testbroker.OnceInOrder(t, "records published after the last re-creation", storedFrom(t, c, "recreated", 300), n)
}

// storedFrom returns the values the log of kname holds, in log order, each
// less base.
func storedFrom(t *testing.T, c *kfake.Cluster, kname string, base int) []int {
	t.Helper()
	var got []int
	for _, r := range testbroker.Log(t, c.ListenAddrs(), kname) {
		v, err := topic.IntCodec{}.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v-base)
	}
	return got
}
