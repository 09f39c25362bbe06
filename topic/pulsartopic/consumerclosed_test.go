package pulsartopic_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/internal/readertest"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// revoked is a refusal pulsar-client-go does not retry: a consumer whose
// resubscription the broker answers so is closed by the client.
var revoked = &pulsartest.ServerError{Code: pulsartest.AuthorizationError, Message: "authorization revoked"}

// Guarantee: when pulsar-client-go closes a subscription's consumer by
// itself (here the broker refuses its resubscription for good after the
// connection dropped), a Receive waiting returns at once an error
// wrapping ErrConsumerClosed and the client's cause, and so does every
// later Receive, and one ERROR line names the topic and the subscription;
// Close still returns quietly afterwards. A balanced member and a
// broadcast subscriber alike.
func TestReceiveFailsOnceTheClientClosedTheConsumer(t *testing.T) {
	for name, mode := range readertest.Modes() {
		t.Run(name, func(t *testing.T) {
			reconnectionsEnd(t)
			b := testbroker.Pulsar(t)
			var lines logtest.Lines
			o := testOptions[int](b, topic.IntCodec{})
			o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
			be := newBackend(t, o)
			sub := subscribed(t, be, "revoked", mode)

			full := be.TopicName("revoked")
			name := subscriptionOf(t, b, full, mode, "")
			b.RefuseSubscribe(full, name, revoked)
			b.DropConnections()
			_, err := sub.Receive(ctxT(t))
			if !errors.Is(err, pulsartopic.ErrConsumerClosed) {
				t.Fatalf("Receive = %v, want an error wrapping ErrConsumerClosed", err)
			}
			var pe *pulsartopic.Error
			if !errors.As(err, &pe) || pe.Topic != full {
				t.Fatalf("Receive = %v, want a *pulsartopic.Error naming the topic", err)
			}
			t.Logf("Receive: %v", err)
			if _, again := sub.Receive(ctxT(t)); !errors.Is(again, pulsartopic.ErrConsumerClosed) {
				t.Fatalf("a later Receive = %v, want ErrConsumerClosed again", again)
			}
			lines.Want(t, 1, "the lost consumer's line", "level=ERROR", "closed the subscription's consumer", "subscription="+name, "AuthorizationError")
			sub.Close()
		})
	}
}

// subscribed returns a subscription of mode to the topic name (which takes
// both modes) once its consumer is subscribed: it has received and acked
// a message published after it subscribed.
// Guarantee: when the application closes the client under the backend,
// a subscription's Receive returns an error wrapping ErrConsumerClosed and
// sources/pulsar's ErrClosedByCall, the cause, so that a caller tells this
// closing apart from the client's own. A balanced member and a broadcast
// subscriber alike.
func TestReceiveNamesTheApplicationsCloseOfTheClientAsTheCause(t *testing.T) {
	for name, mode := range readertest.Modes() {
		t.Run(name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			client := testClient(t, b)
			o := testOptions[int](b, topic.IntCodec{})
			o.ServiceURL, o.Client = "", client
			o.Logger = slog.New(slog.DiscardHandler)
			be := newBackend(t, o)
			sub := subscribed(t, be, "closed-by-call", mode)
			client.Close()
			_, err := sub.Receive(ctxT(t))
			if !errors.Is(err, pulsartopic.ErrConsumerClosed) || !errors.Is(err, spulsar.ErrClosedByCall) {
				t.Fatalf("Receive = %v, want an error wrapping ErrConsumerClosed and ErrClosedByCall", err)
			}
			sub.Close()
		})
	}
}

func subscribed(t *testing.T, be *pulsartopic.Backend[int], name topic.Name, mode topic.SubscriptionMode) *topic.Subscription[int] {
	t.Helper()
	sub, it := subscribedHolding(t, be, name, mode)
	_ = sub.Ack(it.ID)
	return sub
}

// subscribedHolding returns a subscription of mode to the topic name and
// the message, published after it subscribed, that it received and has
// not settled.
func subscribedHolding(t *testing.T, be *pulsartopic.Backend[int], name topic.Name, mode topic.SubscriptionMode) (*topic.Subscription[int], topic.Item[int]) {
	t.Helper()
	h := newHandle(t, be, name, topic.Options{Mode: topic.Mixed})
	sub := subscribe(t, h, mode)
	if err := h.Publish(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return sub, it
}

// subscriptionOf returns the name of the subscription of mode on topic
// full: the group's, or the one broadcast subscription other than
// previous, once the broker holds it (a broadcast subscription is the
// broker's while its consumer is subscribed).
func subscriptionOf(t *testing.T, b *pulsartest.Broker, full string, mode topic.SubscriptionMode, previous string) string {
	t.Helper()
	if !mode.IsBroadcast() {
		return string(mode.Group())
	}
	var name string
	wait.Within(t, patience, "the broadcast subscription", func() bool {
		for _, s := range b.Subscriptions(full) {
			if strings.HasPrefix(s, pulsartopic.BroadcastPrefix) && s != previous {
				name = s
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprint(b.Subscriptions(full)) })
	return name
}

// Guarantee: a pipeline reading a Pulsar topic through topic/source, whose
// consumer pulsar-client-go closed by itself, does not stay running with
// nothing to read: its run fails with an error wrapping ErrConsumerClosed,
// the stage restarts and subscribes anew, and every message published once
// it is subscribed again is handled. A balanced member's restarted runs
// fail while the broker still refuses its group's subscription; a
// broadcast subscriber subscribes anew under a subscription of its own.
func TestTopicSourceSubscribesAnewOnceTheClientClosedItsConsumer(t *testing.T) {
	for name, mode := range readertest.Modes() {
		t.Run(name, func(t *testing.T) {
			reconnectionsEnd(t)
			b := testbroker.Pulsar(t)
			be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
			h := newHandle(t, be, "lost", topic.Options{Mode: topic.Mixed})
			var lines logtest.Lines
			r := readertest.Start(t, "lost", h, mode, slog.New(slog.NewTextHandler(&lines, nil)))
			full := be.TopicName("lost")
			publish := func(from, to int) {
				t.Helper()
				for v := from; v < to; v++ {
					payload, _ := topic.IntCodec{}.Encode(v)
					// Through the broker's API: the backend's producer may be
					// reconnecting.
					if _, err := b.Publish(ctxT(t), full, pulsartest.Message{Payload: payload}); err != nil {
						t.Fatal(err)
					}
				}
			}
			first := subscriptionOf(t, b, full, mode, "")
			publish(0, 5)
			wait.Within(t, patience, "the messages published first", func() bool { return r.Handled() == 5 }, r.String)

			b.RefuseSubscribe(full, first, revoked)
			b.DropConnections()
			wait.Within(t, patience, "the run to fail with ErrConsumerClosed", func() bool {
				return r.Status().Restarts >= 1 && lines.Count("closed the subscription's consumer") > 0
			}, r.String)
			b.RefuseSubscribe(full, first, nil)
			subscriptionOf(t, b, full, mode, first)
			publish(5, 10)
			wait.Within(t, patience, "every message published after the consumer was closed", func() bool { return r.Handled() == 10 },
				func() string { return fmt.Sprintf("%s, last error %v", r.String(), r.Status().LastError) })
		})
	}
}

// Guarantee: Options.MaxReconnectToBroker reaches every subscription's
// consumer, a balanced member's and a broadcast subscriber's alike. Set
// to 1, the client gives up on a consumer whose first reconnection the
// broker refuses (a refusal it would retry): Receive fails with
// ErrConsumerClosed and the client's cause. With the default the
// consumer goes on reconnecting past such refusals, and receives what is
// published once the broker accepts it again.
func TestMaxReconnectToBrokerBoundsTheConsumersReconnections(t *testing.T) {
	for _, c := range []struct {
		name string
		mode topic.SubscriptionMode
		max  int
	}{
		{"balanced/1", topic.Balanced("g"), 1},
		{"broadcast/1", topic.Broadcast(), 1},
		{"balanced/default", topic.Balanced("g"), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			reconnectionsEnd(t)
			b := testbroker.Pulsar(t)
			o := testOptions[int](b, topic.IntCodec{})
			o.MaxReconnectToBroker = c.max
			be := newBackend(t, o)
			sub := subscribed(t, be, "flaky", c.mode)

			full := be.TopicName("flaky")
			name := subscriptionOf(t, b, full, c.mode, "")
			refused := b.Stats().SubscribesRefused
			b.RefuseSubscribe(full, name, errors.New("not now"))
			b.DropConnections()
			if c.max == 1 {
				_, err := sub.Receive(ctxT(t))
				if !errors.Is(err, pulsartopic.ErrConsumerClosed) || !strings.Contains(err.Error(), "max retry attempts") {
					t.Fatalf("Receive = %v, want ErrConsumerClosed with the client's cause", err)
				}
				return
			}
			wait.Within(t, patience, "two reconnections refused", func() bool { return b.Stats().SubscribesRefused >= refused+2 })
			b.RefuseSubscribe(full, name, nil)
			payload, _ := topic.IntCodec{}.Encode(2)
			if _, err := b.Publish(ctxT(t), full, pulsartest.Message{Payload: payload}); err != nil {
				t.Fatal(err)
			}
			for { // 1 comes again when its ack was lost with the connection
				it, err := sub.Receive(ctxT(t))
				if err != nil {
					t.Fatalf("Receive after the broker accepted the consumer again: %v", err)
				}
				_ = sub.Ack(it.ID)
				if it.Value == 2 {
					break
				}
			}
		})
	}
}

// Guarantee: a message received before pulsar-client-go closed its
// subscription's consumer by itself can no longer be acknowledged through
// it, and Ack says so: it returns an error naming the topic rather than
// nil, so that the caller does not count the message as committed (the
// broker delivers it again to the group's next consumer).
func TestAckFailsOnceTheClientClosedTheConsumer(t *testing.T) {
	reconnectionsEnd(t)
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	mode := topic.Balanced("workers")
	sub, it := subscribedHolding(t, be, "ackclosed", mode)
	full := be.TopicName("ackclosed")
	b.RefuseSubscribe(full, subscriptionOf(t, b, full, mode, ""), revoked)
	b.DropConnections()
	if _, err := sub.Receive(ctxT(t)); !errors.Is(err, pulsartopic.ErrConsumerClosed) {
		t.Fatalf("Receive = %v, want an error wrapping ErrConsumerClosed", err)
	}
	err := sub.Ack(it.ID)
	var pe *pulsartopic.Error
	if !errors.As(err, &pe) || pe.Topic != full {
		t.Fatalf("Ack after the client closed the consumer = %v, want a *pulsartopic.Error naming the topic", err)
	}
	t.Logf("Ack: %v", err)
	sub.Close()
}
