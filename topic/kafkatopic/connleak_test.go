package kafkatopic_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/testnet"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: each subscription's client closes its connections when the
// subscription closes, and the backend's Close closes the rest: ten
// rounds of a balanced and a broadcast subscription leave the backend no
// more connections than its producer and admin keep, and Close none.
func TestClosedSubscriptionsAndBackendLeaveNoConnectionOpen(t *testing.T) {
	const (
		rounds = 10
		// A moment's slack over the backend's own connections: a
		// metadata refresh may open one more.
		slack = 2
	)
	c := testbroker.Kafka(t)
	brokers := c.ListenAddrs()
	conns := func() int { return testnet.ConnsTo(t, brokers...) }
	b, err := kafkatopic.New(testOptions[string](c, topic.StringCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := topic.NewTopic("conns", topic.Options{Mode: topic.Mixed}, topic.Backend[string](b))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Publish(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	own := conns()
	for i := range rounds {
		for _, mode := range []topic.SubscriptionMode{topic.Balanced("g"), topic.Broadcast()} {
			s, err := h.Subscribe(ctxT(t), mode, topic.SubscriberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		testnet.SettlesAtMost(t, 5*time.Second, fmt.Sprintf("connections to the brokers after %d closed subscriptions (the backend's own: %d)", 2*(i+1), own), own+slack, conns)
	}
	h.Close()
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	testnet.SettlesAtMost(t, 5*time.Second, "connections to the brokers once the backend closed", 0, conns)
}
