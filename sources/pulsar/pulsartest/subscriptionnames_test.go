package pulsartest

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: Subscriptions lists the subscriptions a topic holds, sorted
// and each once: for a partitioned topic's base name those of its
// partitions, for a partition's name its own; a non-durable subscription
// is listed while it has a consumer, and a topic the broker does not know
// has none.
func TestSubscriptionsListsWhatTheTopicHolds(t *testing.T) {
	b := startBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t)
	if err := b.CreateTopic(topic, 2); err != nil {
		t.Fatal(err)
	}
	subscribe := func(name string, mode pulsar.SubscriptionMode) pulsar.Consumer {
		t.Helper()
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: name, Type: pulsar.Failover, SubscriptionMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	durable := subscribe("b", pulsar.Durable)
	defer durable.Close()
	subscribe("a", pulsar.Durable).Close()
	passing := subscribe("c", pulsar.NonDurable)
	for _, name := range []string{topic, PartitionTopic(topic, 0), PartitionTopic(topic, 1)} {
		if got := b.Subscriptions(name); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("Subscriptions(%q) = %q, want [a b c]", name, got)
		}
	}
	passing.Close()
	wait.Within(t, 10*time.Second, "the non-durable subscription to go with its consumer", func() bool {
		return slices.Equal(b.Subscriptions(topic), []string{"a", "b"})
	})
	if got := b.Subscriptions(uniqueTopic(t)); got != nil {
		t.Fatalf("Subscriptions of an unknown topic = %q, want none", got)
	}
}
