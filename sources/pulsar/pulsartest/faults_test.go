package pulsartest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// After DropConnections clients reconnect by themselves; a consumer
// resubscribes and nothing is lost: messages it held unacked are pushed
// again. (Messages are published through the test API: pulsar-client-go
// (v0.21.0) has a data race in its producer reconnect path — grabCnx writes
// fields the send loop reads — that -race reports when a producer is
// sending while its connection drops.)
func TestDropConnectionsNothingLost(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 20
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := map[string]bool{}
	publish(0, n/2)
	for range n / 4 {
		m := receive(t, ctx, c)
		got[string(m.Payload())] = true
		_ = c.Ack(m)
	}
	wait.For(t, "acks", func() bool { return b.Backlog(topic, "s") == int64(n/2-n/4) })
	b.DropConnections()
	if st := b.Consumers(topic, "s"); st[0].Connected {
		t.Fatalf("consumer still attached after the drop: %+v", st[0])
	}
	publish(n/2, n)
	for len(got) < n {
		m := receive(t, ctx, c)
		got[string(m.Payload())] = true
		_ = c.Ack(m)
	}
	wait.For(t, "backlog drained", func() bool { return b.Backlog(topic, "s") == 0 })
	if st := b.Stats(); st.ConnectionsAccepted < 2 {
		t.Fatalf("client did not reconnect: %+v", st)
	}
	cs := b.Consumers(topic, "s")
	if len(cs) < 2 || cs[0].Connected || !cs[len(cs)-1].Connected {
		t.Fatalf("consumers %+v", cs)
	}
}

// RefuseSubscribe fails subscribes with the chosen server error until it
// is cleared, and the broker counts the subscribes it refused.
func TestRefuseSubscribe(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	topic := uniqueTopic(t)
	b.RefuseSubscribe(topic, "s", &ServerError{Code: NotAllowedError, Message: "injected refusal"})
	_, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err == nil || !strings.Contains(err.Error(), "injected refusal") {
		t.Fatalf("subscribe error %v", err)
	}
	other, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "other"})
	if err != nil {
		t.Fatalf("other subscription refused: %v", err)
	}
	other.Close()
	b.RefuseSubscribe(topic, "s", errors.New("plain error"))
	if _, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"}); err == nil || !strings.Contains(err.Error(), "plain error") {
		t.Fatalf("subscribe error %v", err)
	}
	refused := b.Stats().SubscribesRefused
	if refused < 2 {
		t.Fatalf("%d refused subscribes counted, want at least 2", refused)
	}
	b.RefuseSubscribe(topic, "s", nil)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatalf("after clearing: %v", err)
	}
	c.Close()
	if n := b.Stats().SubscribesRefused; n != refused {
		t.Fatalf("%d refused subscribes counted after clearing, want %d", n, refused)
	}
}

// While dispatch is stalled nothing is pushed but flows are still counted;
// on resume the stored messages arrive.
func TestStallDispatch(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	if err := b.CreateTopic(topic, 0); err != nil {
		t.Fatal(err)
	}
	b.StallDispatch(topic, true)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("a")}, Message{Payload: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "flow", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 1 && st[0].PermitsGranted == 7
	})
	noMessage(t, c, 100*time.Millisecond)
	if st := b.Consumers(topic, "s")[0]; st.Dispatched != 0 || st.Available != 7 {
		t.Fatalf("stalled stats %+v", st)
	}
	b.StallDispatch(topic, false)
	for _, want := range []string{"a", "b"} {
		if m := receive(t, ctx, c); string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
	}
}

// Close stops the broker: clients can no longer reach it, and the test API
// reports ErrClosed while stored messages stay readable.
func TestCloseStopsBroker(t *testing.T) {
	b, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(context.Background(), "x", Message{Payload: []byte("kept")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := b.Publish(context.Background(), "x", Message{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if ms := b.Messages("x"); len(ms) != 1 {
		t.Fatalf("Messages after Close: %v", ms)
	}
	if _, err := (&net.Dialer{Timeout: time.Second}).Dial("tcp", b.Addr().String()); err == nil {
		t.Fatal("still accepting connections")
	}
}
