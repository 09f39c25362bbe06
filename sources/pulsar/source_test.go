package pulsar_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Every published message reaches the handler exactly once and is acked at
// the broker; stopping the pipeline closes the consumers but not the client.
func TestConsumeAndAck(t *testing.T) {
	e := newEnv(t)
	want := e.publish("orders", "m", 250)
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"orders"}, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	_, stop := run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "every message handled", func() bool { return r.distinct() == len(want) })
	wait.Within(t, waitLimit, "every message acked at the broker", func() bool { return e.sumAcked("orders", "sub", 0) == int64(len(want)) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	counts, _ := r.snapshot()
	for _, w := range want {
		if counts[w] != 1 {
			t.Errorf("%s handled %d times", w, counts[w])
		}
	}
	if st := src.Stats(); st.Consumers != 0 {
		t.Errorf("%d consumers left open after stop", st.Consumers)
	}
	for _, c := range e.broker.Consumers("orders", "sub") {
		if c.Connected {
			t.Errorf("consumer %d still connected after stop", c.ConsumerID)
		}
	}
	// The shared client still works: it can create a producer.
	if _, err := e.client.TopicPartitions("orders"); err != nil {
		t.Errorf("client unusable after the pipeline stopped: %v", err)
	}
}

// Each SubscriptionType subscribes with the matching Pulsar subscription
// type, and Shared is what the zero value asks for.
func TestSubscriptionTypes(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		typ  bpulsar.SubscriptionType
		want string
	}{
		{bpulsar.SubscriptionType(0), "Shared"},
		{bpulsar.Exclusive, "Exclusive"},
		{bpulsar.Failover, "Failover"},
		{bpulsar.KeyShared, "Key_Shared"},
	} {
		topic := "types-" + tc.typ.String()
		want := e.publish(topic, "m", 3)
		r := newReceived()
		src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{topic}, Subscription: "sub", SubscriptionType: tc.typ, Consumer: earliest(), Logger: testLogger()})
		_, stop := run(t, src, 1, producer.Flow{}, recordAll(r))
		wait.Within(t, waitLimit, "messages handled", func() bool { return r.distinct() == len(want) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		cs := e.broker.Consumers(topic, "sub")
		if len(cs) != 1 || cs[0].SubType != tc.want {
			t.Errorf("%s: broker saw %+v, want one %s consumer", tc.typ, cs, tc.want)
		}
	}
}

// Guarantee: the source keeps the topics it was given: an application
// that reuses its slice after New changes nothing the source subscribes
// to.
func TestTheSourceKeepsTheTopicsItWasGiven(t *testing.T) {
	e := newEnv(t)
	want := e.publish("given", "m", 20)
	topics := []string{"given"}
	r := newReceived()
	src := bpulsar.New(bpulsar.Options{Client: e.client, Topics: topics, Subscription: "sub", Consumer: earliest(), Logger: testLogger()})
	topics[0] = "reused"
	run(t, src, 1, producer.Flow{}, recordAll(r))
	wait.Within(t, waitLimit, "every message of the given topic handled", func() bool { return r.distinct() == len(want) })
	if subs := e.broker.Subscriptions("reused"); len(subs) != 0 {
		t.Errorf("subscriptions %v on the topic the application wrote into its slice after New", subs)
	}
}
