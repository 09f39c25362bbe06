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

// Guarantee: a command of a type Withhold holds back goes unanswered, and
// the client's call waits, until release; the broker then handles it as
// usual and the call succeeds. Commands of other types, on another
// connection, are answered meanwhile.
func TestWithheldCommandsAreAnsweredOnlyOnceReleased(t *testing.T) {
	b := startBroker(t)
	producing := func(cl pulsar.Client, topic string) (pulsar.Producer, error) {
		return cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: -1})
	}
	subscribing := func(cl pulsar.Client, topic string) (pulsar.Consumer, error) {
		return cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	}
	connected := func(t *testing.T, topic string, want bool) {
		t.Helper()
		st := b.Consumers(topic, "s")
		if len(st) != 1 || st[0].Connected != want {
			t.Errorf("consumers of %s = %+v, want one, connected %v", topic, st, want)
		}
	}
	for _, c := range []struct {
		cmd Command
		// call starts the client's call on cl and returns it; after, run
		// once it returned, checks what it did.
		call  func(t *testing.T, cl pulsar.Client, topic string) (call func() error, after func())
		other func(cl pulsar.Client, topic string) error // nil: none
	}{
		{CommandPartitionedMetadata, func(t *testing.T, cl pulsar.Client, topic string) (func() error, func()) {
			return func() error {
				ps, err := cl.TopicPartitions(topic)
				if err == nil && len(ps) != 1 {
					err = fmt.Errorf("partitions %v", ps)
				}
				return err
			}, func() {}
		}, nil},
		{CommandLookup, func(t *testing.T, cl pulsar.Client, topic string) (func() error, func()) {
			var p pulsar.Producer
			return func() (err error) {
				p, err = producing(cl, topic)
				return err
			}, func() { p.Close() }
		}, nil},
		{CommandProducer, func(t *testing.T, cl pulsar.Client, topic string) (func() error, func()) {
			var p pulsar.Producer
			return func() (err error) {
				p, err = producing(cl, topic)
				return err
			}, func() { p.Close() }
		}, func(cl pulsar.Client, topic string) error {
			c, err := subscribing(cl, topic+"-other")
			if err == nil {
				c.Close()
			}
			return err
		}},
		{CommandSubscribe, func(t *testing.T, cl pulsar.Client, topic string) (func() error, func()) {
			var c pulsar.Consumer
			return func() (err error) {
					c, err = subscribing(cl, topic)
					return err
				}, func() {
					connected(t, topic, true)
					c.Close()
				}
		}, func(cl pulsar.Client, topic string) error {
			p, err := producing(cl, topic+"-other")
			if err == nil {
				p.Close()
			}
			return err
		}},
		{CommandSend, func(t *testing.T, cl pulsar.Client, topic string) (func() error, func()) {
			p, err := producing(cl, topic)
			if err != nil {
				t.Fatal(err)
			}
			return func() error {
					_, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("withheld")})
					return err
				}, func() {
					if ms := b.Messages(topic); len(ms) != 1 {
						t.Errorf("%d messages on the topic once the send was released, want 1", len(ms))
					}
					p.Close()
				}
		}, func(cl pulsar.Client, topic string) error {
			p, err := producing(cl, topic+"-other")
			if err == nil {
				p.Close()
			}
			return err
		}},
		{CommandCloseProducer, func(t *testing.T, cl pulsar.Client, topic string) (func() error, func()) {
			p, err := producing(cl, topic)
			if err != nil {
				t.Fatal(err)
			}
			return func() error { p.Close(); return nil }, func() {}
		}, nil},
		{CommandCloseConsumer, func(t *testing.T, cl pulsar.Client, topic string) (func() error, func()) {
			c, err := subscribing(cl, topic)
			if err != nil {
				t.Fatal(err)
			}
			return func() error { c.Close(); return nil }, func() { connected(t, topic, false) }
		}, nil},
	} {
		t.Run(c.cmd.String(), func(t *testing.T) {
			// The client would give up long after the test's waits.
			cl := newClientWaiting(t, b, time.Minute)
			topic := uniqueTopic(t)
			call, after := c.call(t, cl, topic)
			release := b.Withhold(c.cmd)
			defer release()
			done := make(chan error, 1)
			go func() { done <- call() }()
			wait.For(t, c.cmd.String()+" withheld", func() bool { return b.Stats().Withheld == 1 })
			if c.other != nil {
				if err := c.other(newClient(t, b), topic); err != nil {
					t.Errorf("another connection's call while %s is withheld: %v", c.cmd, err)
				}
			}
			select {
			case err := <-done:
				t.Fatalf("the call returned (%v) while the broker withholds %s", err, c.cmd)
			default:
			}
			release()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the call once %s was released: %v", c.cmd, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("the call still waits 20s after %s was released", c.cmd)
			}
			after()
			if n := b.Stats().Withheld; n != 0 {
				t.Errorf("Stats().Withheld = %d once released, want 0", n)
			}
		})
	}
}

// Guarantee: closing the broker while it withholds a command returns and
// closes the waiting connection: the client's call fails then, long before
// its operation timeout.
func TestCloseEndsAWithheldCommand(t *testing.T) {
	b := startBroker(t)
	cl := newClientWaiting(t, b, time.Minute)
	b.Withhold(CommandSubscribe)
	done := make(chan error, 1)
	go func() {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: uniqueTopic(t), SubscriptionName: "s"})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	wait.For(t, "SUBSCRIBE withheld", func() bool { return b.Stats().Withheld == 1 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the subscribe succeeded on a closed broker")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the subscribe still waits 20s after the broker closed")
	}
}
