package pulsartopic_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: the backend's Close returns by its context's deadline (300ms,
// far below the client's operation timeout of a minute), with an error
// wrapping context.DeadlineExceeded, while the broker holds its answer to
// a call under way: the partition lookup, lookup or producer creation of
// a topic's declaration, the receipt of a publish, or the partition
// lookup, lookup or subscribe of a subscriber. What is still closing is
// left to the background.
func TestCloseReturnsByItsDeadlineWhileTheBrokerHoldsACallsAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  pulsartest.Command
		call func(ctx context.Context, be *pulsartopic.Backend[int], h *topic.Handle[int]) error
	}{
		{"declaration/PARTITIONED_METADATA", pulsartest.CommandPartitionedMetadata, declare},
		{"declaration/LOOKUP", pulsartest.CommandLookup, declare},
		{"declaration/PRODUCER", pulsartest.CommandProducer, declare},
		{"publish/SEND", pulsartest.CommandSend, func(ctx context.Context, _ *pulsartopic.Backend[int], h *topic.Handle[int]) error {
			return h.Publish(ctx, 2)
		}},
		{"subscribe/PARTITIONED_METADATA", pulsartest.CommandPartitionedMetadata, subscribeHeld},
		{"subscribe/LOOKUP", pulsartest.CommandLookup, subscribeHeld},
		{"subscribe/SUBSCRIBE", pulsartest.CommandSubscribe, subscribeHeld},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			be := patientBackend(t, b)
			h := newHandle(t, be, "held", topic.Options{})
			if err := h.Publish(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Withhold(c.cmd))
			testbroker.ClosesByDeadlineWhileHeld(t, b, "a "+c.name, func(ctx context.Context) error { return c.call(ctx, be, h) }, be.Close)
		})
	}
}

// declare declares a topic of its own on be.
func declare(ctx context.Context, be *pulsartopic.Backend[int], _ *topic.Handle[int]) error {
	_, err := topic.NewBroker[int]().CreateTopicsContext(ctx, []topic.Declaration[int]{{Name: "declared", Backend: be}})
	return err
}

// subscribeHeld subscribes a group of its own to h, and closes the
// subscription it gets.
func subscribeHeld(ctx context.Context, _ *pulsartopic.Backend[int], h *topic.Handle[int]) error {
	s, err := h.Subscribe(ctx, topic.Balanced("other"), topic.SubscriberOptions{})
	if err == nil {
		s.Close()
	}
	return err
}

// Guarantee: the backend's Close made while a topic's Close, or a
// subscription's, waits for the broker to close its producer or its
// consumer waits for that closing too: with the broker holding its
// answer, it returns by its context's deadline with an error wrapping
// context.DeadlineExceeded, not nil as though all were closed. The
// backend uses the application's client (Options.Client), whose closing
// is not the backend's to wait for; the subscription's topic is closed
// first, so that the backend has no producer of its own left to close on
// the held connection.
func TestBackendCloseWaitsForATopicOrSubscriptionCloseUnderWay(t *testing.T) {
	for _, c := range []struct {
		name  string
		cmd   pulsartest.Command
		close func(t *testing.T, h *topic.Handle[int]) (held func())
	}{
		{"topic/CLOSE_PRODUCER", pulsartest.CommandCloseProducer, func(_ *testing.T, h *topic.Handle[int]) func() { return h.Close }},
		{"subscription/CLOSE_CONSUMER", pulsartest.CommandCloseConsumer, func(t *testing.T, h *topic.Handle[int]) func() {
			s := subscribe(t, h, topic.Balanced("g"))
			h.Close()
			return s.Close
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), OperationTimeout: time.Minute,
				KeepAliveInterval: time.Minute, Logger: quietClientLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			o := testOptions[int](b, topic.IntCodec{})
			o.ServiceURL, o.Client = "", client
			be := newBackend(t, o)
			h := newHandle(t, be, "held", topic.Options{})
			if err := h.Publish(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			held := c.close(t, h)
			release := b.Withhold(c.cmd)
			t.Cleanup(release)
			testbroker.ClosesByDeadlineWhileHeld(t, b, "the "+c.name+" of a Close", func(context.Context) error {
				held()
				return nil
			}, be.Close)
			release() // the held Close returns before the cleanup waits for it
		})
	}
}
