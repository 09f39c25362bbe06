package pulsartest

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// A nack of one message redelivers that message alone, with its
// redelivery count raised; the consumer's other unacked messages stay put.
func TestNackRedeliversOnlyThatMessage(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, NackRedeliveryDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var got []pulsar.Message
	for range 3 {
		got = append(got, receive(t, ctx, c))
	}
	c.Nack(got[1])
	m := receive(t, ctx, c)
	if string(m.Payload()) != string(got[1].Payload()) || m.RedeliveryCount() != 1 {
		t.Fatalf("redelivered %q with count %d, want %q with count 1", m.Payload(), m.RedeliveryCount(), got[1].Payload())
	}
	noMessage(t, c, 100*time.Millisecond)
	if st := b.Consumers(topic, "s")[0]; st.Nacked != 1 || st.Redelivered != 1 || st.Dispatched != 4 {
		t.Fatalf("stats %+v, want 1 nacked, 1 redelivered, 4 dispatched", st)
	}
}
