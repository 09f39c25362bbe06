package pulsartest

import (
	"errors"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Without force, deleting a subscription with a consumer connected is
// refused and leaves it as it was; once its consumers are gone it is
// deleted. An unknown subscription is not found.
func TestDeleteSubscriptionWithoutForceIsRefusedWhileConsumersAreConnected(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("delete-sub-busy")
	r := publishedConsumer(t, b, topic, subShared, 1)
	if err := b.DeleteSubscription(topic, "s", false); !errors.Is(err, ErrSubscriptionBusy) {
		t.Fatalf("DeleteSubscription without force = %v, want ErrSubscriptionBusy", err)
	}
	if st := b.Consumers(topic, "s"); len(st) != 1 || !st[0].Connected {
		t.Fatalf("after the refusal consumers %+v, want the one still connected", st)
	}
	rawClose(r, cmdCloseConsumer, 1, 9)
	if err := b.DeleteSubscription(topic, "s", false); err != nil {
		t.Fatalf("DeleteSubscription of an idle subscription = %v", err)
	}
	if got := b.Subscriptions(topic); len(got) != 0 {
		t.Fatalf("subscriptions after the delete %v, want none", got)
	}
	if err := b.DeleteSubscription(topic, "s", false); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("DeleteSubscription of a deleted subscription = %v, want ErrSubscriptionNotFound", err)
	}
}

// A forced delete sends CLOSE_CONSUMER to the subscription's consumers and
// forgets its cursor: a consumer that subscribes again on an earliest
// position gets every message again, the acknowledged ones included.
func TestForcedDeleteSubscriptionClosesItsConsumersAndForgetsItsPosition(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c := sharedConsumer(t, cl, topic, pulsar.SubscriptionPositionEarliest)
	publishN(t, b, topic, 3)
	for range 3 {
		if err := c.Ack(receive(t, ctx, c)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Backlog(topic, "s"); got != 0 {
		t.Fatalf("backlog before the delete %d, want 0", got)
	}
	if err := b.DeleteSubscription(topic, "s", true); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the consumer to be closed and to subscribe anew", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 1 && st[0].Connected && st[0].Acked == 0
	})
	got := map[string]bool{}
	for len(got) < 3 {
		m := receive(t, ctx, c)
		got[string(m.Payload())] = true
		if err := c.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"m-0", "m-1", "m-2"} {
		if !got[k] {
			t.Fatalf("after the delete got %v, want m-0, m-1 and m-2 again", got)
		}
	}
}

// A consumer whose subscription was deleted under it subscribes anew at
// its initial position: on latest, what was published while the
// subscription was gone never reaches it.
func TestForcedDeleteSubscriptionOnLatestSkipsWhatWasPublishedMeanwhile(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c := sharedConsumer(t, cl, topic, pulsar.SubscriptionPositionLatest)
	b.RefuseSubscribe(topic, "s", errors.New("subscription being deleted"))
	if err := b.DeleteSubscription(topic, "s", true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("meanwhile")}); err != nil {
		t.Fatal(err)
	}
	b.RefuseSubscribe(topic, "s", nil)
	wait.For(t, "the consumer to subscribe anew", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 1 && st[0].Connected
	})
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, ctx, c); string(m.Payload()) != "after" {
		t.Fatalf("first message after the delete %q, want %q (%q was published while the subscription was gone)", m.Payload(), "after", "meanwhile")
	}
}

// Without force, deleting a topic with a producer or a consumer connected
// is refused; a topic with neither is deleted with its messages and
// subscriptions. An unknown topic is not found.
func TestDeleteTopicWithoutForceIsRefusedWhileProducersOrConsumersAreConnected(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("delete-topic-busy")
	r := publishedConsumer(t, b, topic, subShared, 1)
	if err := b.DeleteTopic(topic, false); !errors.Is(err, ErrTopicBusy) {
		t.Fatalf("DeleteTopic with a consumer, without force = %v, want ErrTopicBusy", err)
	}
	rawClose(r, cmdCloseConsumer, 1, 9)
	rawProducer(r, topic)
	if err := b.DeleteTopic(topic, false); !errors.Is(err, ErrTopicBusy) {
		t.Fatalf("DeleteTopic with a producer, without force = %v, want ErrTopicBusy", err)
	}
	rawClose(r, cmdCloseProducer, 1, 10)
	if err := b.DeleteTopic(topic, false); err != nil {
		t.Fatalf("DeleteTopic of an idle topic = %v", err)
	}
	if ms, subs := b.Messages(topic), b.Subscriptions(topic); len(ms) != 0 || len(subs) != 0 {
		t.Fatalf("after the delete messages %d, subscriptions %v, want none", len(ms), subs)
	}
	if err := b.DeleteTopic(topic, false); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("DeleteTopic of a deleted topic = %v, want ErrTopicNotFound", err)
	}
}

// A forced delete sends CLOSE_PRODUCER and CLOSE_CONSUMER to the topic's
// clients and drops its messages and subscriptions: a consumer that
// subscribes again finds the topic re-created empty, and gets nothing of
// the deleted topic even from an earliest position.
func TestForcedDeleteTopicClosesItsClientsAndDropsItsMessages(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c := sharedConsumer(t, cl, topic, pulsar.SubscriptionPositionEarliest)
	publishN(t, b, topic, 2)
	receive(t, ctx, c)
	receive(t, ctx, c)
	r := dialRaw(t, b)
	r.connect(20)
	rawProducer(r, topic)
	if err := b.DeleteTopic(topic, true); err != nil {
		t.Fatal(err)
	}
	if f, _ := r.expect(cmdCloseProducer); f.u[1] != 1 {
		t.Fatalf("CLOSE_PRODUCER %+v, want producer 1", f)
	}
	wait.For(t, "the consumer to be closed and to subscribe anew", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 1 && st[0].Connected
	})
	if ms := b.Messages(topic); len(ms) != 0 {
		t.Fatalf("re-created topic holds %d messages, want none", len(ms))
	}
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, ctx, c); string(m.Payload()) != "after" {
		t.Fatalf("first message after the delete %q, want %q", m.Payload(), "after")
	}
}

// sharedConsumer subscribes a Shared consumer of subscription "s" on topic
// from initial, acknowledging with receipts; it is closed at the end of
// the test.
func sharedConsumer(t *testing.T, cl pulsar.Client, topic string, initial pulsar.SubscriptionInitialPosition) pulsar.Consumer {
	t.Helper()
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: initial, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// rawClose closes producer or consumer id of r with command typ
// (CLOSE_PRODUCER or CLOSE_CONSUMER) and waits for the broker's answer.
func rawClose(r *rawConn, typ int, id, reqID uint64) {
	r.send(typ, func(o []byte) []byte {
		o = appendVarintField(o, 1, id)
		return appendVarintField(o, 2, reqID)
	}, nil)
	r.expect(cmdSuccess)
}
