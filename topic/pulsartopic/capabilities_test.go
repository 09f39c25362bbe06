package pulsartopic_test

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: what the backend cannot honour is refused when the topic is
// created, with an UnsupportedError naming the option, its value and the
// backend, and nothing is created on the broker.
func TestCapabilityRefusals(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	cases := []struct {
		name, what, value string
		o                 topic.Options
	}{
		{"lag-disconnect", "broadcast.on_lag", "disconnect", topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect}}},
		{"propagation", "ack_propagation.mode", "auto", topic.Options{AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}},
		{"ack-all", "broadcast.on_lag", "disconnect", topic.Options{Mode: topic.BroadcastOnly,
			Broadcast:      topic.BroadcastPolicy{OnLag: topic.Disconnect, AckMode: topic.AckAll},
			AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}},
	}
	for _, c := range cases {
		_, err := topic.NewTopic[int](topic.Name(c.name), c.o, be)
		var ue *topic.UnsupportedError
		if !errors.As(err, &ue) || !errors.Is(err, topic.ErrUnsupportedPolicy) || ue.Backend != "pulsar" || ue.What != c.what || ue.Value != c.value {
			t.Fatalf("%s: NewTopic = %v, want an UnsupportedError for %s %s on pulsar", c.name, err, c.what, c.value)
		}
		if ms := b.Messages(be.TopicName(topic.Name(c.name))); ms != nil {
			t.Fatalf("%s: refused topic exists on the broker", c.name)
		}
	}
}

// Guarantee: a tracked publisher, whose outcomes cannot travel back from
// another process, is refused on a Pulsar topic.
func TestTrackedRefused(t *testing.T) {
	be := newBackend(t, testOptions[int](testbroker.Pulsar(t), topic.IntCodec{}))
	h, err := topic.NewTopic[int]("t", topic.Options{}, be)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Tracked(topic.TrackedOptions{}); !errors.Is(err, topic.ErrUnsupportedPolicy) {
		t.Fatalf("Tracked = %v, want ErrUnsupportedPolicy", err)
	}
}

// Guarantee: the capabilities declare every mode, both on_full policies,
// drop_oldest, ack_mode first and propagation disabled; persistent topics
// are durable and non-persistent ones are not.
func TestCapabilitiesDeclared(t *testing.T) {
	b := testbroker.Pulsar(t)
	o := testOptions[int](b, topic.IntCodec{})
	c := newBackend(t, o).Capabilities()
	if len(c.Modes) != 3 || len(c.OnFull) != 2 || len(c.OnLag) != 1 || c.OnLag[0] != topic.DropOldest ||
		len(c.AckModes) != 1 || c.AckModes[0] != topic.AckFirst || len(c.Propagation) != 1 || c.Propagation[0] != topic.PropagationDisabled {
		t.Fatalf("Capabilities = %+v", c)
	}
	if !c.Has(topic.FeatureDurable) || c.Has(topic.FeatureGroupBackpressure) || c.Has(topic.FeatureBroadcastCapacity) {
		t.Fatalf("persistent features = %v, want durable only", c.Features)
	}
	o.NonPersistent = true
	if newBackend(t, o).Capabilities().Has(topic.FeatureDurable) {
		t.Fatal("a non-persistent backend declares FeatureDurable")
	}
}

var _ = pulsartopic.Name

// Guarantee: on a balanced-only topic, a second group this process asks
// for is refused with ErrSubscribeSingleGroupViolation before anything is
// subscribed: no durable subscription of that name is left on the broker
// to keep messages for ever.
func TestASecondGroupRefusedOnABalancedOnlyTopicLeavesNoSubscription(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "single", topic.Options{Mode: topic.BalancedOnly})
	subscribe(t, h, topic.Balanced("first"))
	if _, err := h.Subscribe(t.Context(), topic.Balanced("second"), topic.SubscriberOptions{}); !errors.Is(err, topic.ErrSubscribeSingleGroupViolation) {
		t.Fatalf("Subscribe to a second group = %v, want ErrSubscribeSingleGroupViolation", err)
	}
	if subs := b.Subscriptions(be.TopicName("single")); len(subs) != 1 || subs[0] != "first" {
		t.Fatalf("subscriptions on the broker: %v, want only the first group's", subs)
	}
}
