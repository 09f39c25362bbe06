package pulsartest

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// publishN stores n messages "m-<i>" on topic.
func publishN(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	for i := range n {
		if _, err := b.Publish(ctxT(t), topic, Message{Payload: fmt.Appendf(nil, "m-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// On Exclusive and Failover subscriptions a nack does not redeliver the
// message named: as a real broker does (ServerCnx.handleRedeliverUnacknowledged
// redelivers individual messages only for Shared and Key_Shared; for the
// others PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages
// rewinds the cursor), every unacknowledged message comes back, in order,
// and redelivery counts stay 0 (the redelivery tracker is disabled there).
func TestSingleActiveRedeliveryRewinds(t *testing.T) {
	for name, typ := range map[string]pulsar.SubscriptionType{"exclusive": pulsar.Exclusive, "failover": pulsar.Failover} {
		t.Run(name, func(t *testing.T) {
			b := startBroker(t)
			cl := newClient(t, b)
			ctx := ctxT(t)
			topic := uniqueTopic(t)
			publishN(t, b, topic, 5)
			c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: typ,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
				NackRedeliveryDelay:         50 * time.Millisecond, AckWithResponse: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var first []pulsar.Message
			for range 5 {
				first = append(first, receive(t, ctx, c))
			}
			for _, m := range first[:2] {
				if err := c.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
			c.Nack(first[2]) // m-3 and m-4 are in flight, unacknowledged
			for i := 2; i < 5; i++ {
				m := receive(t, ctx, c)
				if want := fmt.Sprintf("m-%d", i); string(m.Payload()) != want || m.RedeliveryCount() != 0 {
					t.Fatalf("after the nack got %q with redelivery count %d, want %s with 0", m.Payload(), m.RedeliveryCount(), want)
				}
				if err := c.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the backlog to empty", func() bool { return b.Backlog(topic, "s") == 0 })
			noMessage(t, c, 50*time.Millisecond)
			st := b.Consumers(topic, "s")[0]
			if st.Nacked != 1 || st.Redelivered != 3 || st.Dispatched != 8 {
				t.Fatalf("stats %+v, want 1 nacked, 3 redelivered, 8 dispatched", st)
			}
		})
	}
}
