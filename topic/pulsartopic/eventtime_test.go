package pulsartopic_test

import (
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// A value's event time becomes its message's event time, so a pipeline
// that publishes what it read keeps the time; without one there is none.
func TestEventTimeIsTheMessageEventTime(t *testing.T) {
	br := testbroker.Pulsar(t)
	o := testOptions[int](br, topic.IntCodec{})
	when := time.Date(2024, 2, 29, 12, 30, 0, 0, time.UTC)
	o.EventTime = func(v int) time.Time {
		if v == 1 {
			return when
		}
		return time.Time{}
	}
	b := newBackend(t, o)
	h, err := topic.NewTopic[int]("stamped", topic.Options{}, b)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: br.URL(), OperationTimeout: 5 * time.Second, Logger: quietClientLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "persistent://public/default/stamped", SubscriptionName: "check",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for _, v := range []int{1, 2} {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int{1, 2} {
		m, err := consumer.Receive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := topic.IntCodec{}.Decode(m.Payload())
		switch {
		case v != want:
			t.Fatalf("message %d: value %d", want, v)
		case want == 1 && !m.EventTime().Equal(when):
			t.Fatalf("message 1 has event time %v, want %v", m.EventTime(), when)
		case want == 2 && !m.EventTime().IsZero() && m.EventTime().UnixMilli() != 0: // none reads as the zero time or the epoch
			t.Fatalf("message 2 has event time %v, want none", m.EventTime())
		}
		_ = consumer.Ack(m)
	}
}
