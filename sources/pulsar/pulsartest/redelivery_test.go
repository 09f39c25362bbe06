package pulsartest

import (
	"errors"
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

// On a Shared subscription a redelivery request names only what the
// consumer holds: a real broker looks the ids up in the consumer's own
// pending acks (Consumer.redeliverUnacknowledgedMessages) and ignores the
// others, so a stale nack (pulsar-client-go keeps its nack tracker across a
// reconnection, after which the message may have gone to another consumer)
// never takes a message from the consumer processing it.
func TestRedeliveryIgnoresAnotherConsumersMessage(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("redeliver-other")
	publishN(t, b, topic, 2)
	ledger := b.Messages(topic)[0].ID.LedgerID
	r := dialRaw(t, b)
	r.connect(20)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	rawSubscribe(r, topic, "s", subShared, 2, 2)
	rawFlow(r, 1, 1)
	if f, _ := r.expect(cmdMessage); f.u[1] != 1 {
		t.Fatalf("first message to consumer %d, want 1", f.u[1])
	}
	rawFlow(r, 2, 1)
	if f, _ := r.expect(cmdMessage); f.u[1] != 2 {
		t.Fatalf("second message to consumer %d, want 2", f.u[1])
	}
	// Consumer 1 asks for entry 1, which consumer 2 holds.
	r.send(cmdRedeliver, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendMsgID(o, 2, msgID{ledger: ledger, entry: 1, partition: -1, batchIndex: -1})
	}, nil)
	rawFlow(r, 1, 1)
	r.quiet()
	if st := b.Consumers(topic, "s"); st[0].Nacked != 0 || st[0].Dispatched != 1 || st[1].Dispatched != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Guarantee: SetRedeliveryCount makes the message's next delivery carry
// the count set, and a nack raises it from there; a topic, subscription
// or entry the broker does not have (an id of another ledger included) is
// refused with ErrUnknownMessage.
func TestSetRedeliveryCountIsWhatTheNextDeliveryCarries(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, NackRedeliveryDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids, err := b.Publish(ctx, topic, Message{Payload: []byte("m")})
	if err != nil {
		t.Fatal(err)
	}
	if m := receive(t, ctx, c); m.RedeliveryCount() != 0 {
		t.Fatalf("first delivery with count %d", m.RedeliveryCount())
	} else {
		if err := b.SetRedeliveryCount(topic, "s", ids[0], 1<<31); err != nil {
			t.Fatal(err)
		}
		c.Nack(m)
	}
	if m := receive(t, ctx, c); m.RedeliveryCount() != 1<<31+1 {
		t.Fatalf("redelivered with count %d, want %d", m.RedeliveryCount(), uint32(1<<31+1))
	}
	unknown := ids[0]
	unknown.EntryID++
	otherLedger := ids[0]
	otherLedger.LedgerID++
	for _, bad := range []struct {
		topic, sub string
		id         MessageID
	}{{topic, "s", unknown}, {topic, "s", otherLedger}, {topic, "other", ids[0]}, {uniqueTopic(t) + "-none", "s", ids[0]}} {
		if err := b.SetRedeliveryCount(bad.topic, bad.sub, bad.id, 1); !errors.Is(err, ErrUnknownMessage) {
			t.Errorf("SetRedeliveryCount(%q, %q, %v) = %v, want ErrUnknownMessage", bad.topic, bad.sub, bad.id, err)
		}
	}
}
