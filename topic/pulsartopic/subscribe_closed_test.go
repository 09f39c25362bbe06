package pulsartopic_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// subscribeHookClient is a client given in Options.Client that calls
// during, when set, once its Subscribe has made the consumer, and whose
// consumers count their Close in closed.
type subscribeHookClient struct {
	pulsar.Client
	during *atomic.Pointer[func()]
	closed *atomic.Int32
}

func (c subscribeHookClient) Subscribe(o pulsar.ConsumerOptions) (pulsar.Consumer, error) {
	cons, err := c.Client.Subscribe(o)
	if err != nil {
		return nil, err
	}
	if f := c.during.Load(); f != nil {
		(*f)()
	}
	return closeCountedConsumer{Consumer: cons, closed: c.closed}, nil
}

type closeCountedConsumer struct {
	pulsar.Consumer
	closed *atomic.Int32
}

func (c closeCountedConsumer) Close() {
	c.closed.Add(1)
	c.Consumer.Close()
}

// Guarantee: a Subscribe during which the topic closes returns
// ErrTopicClosed and closes the consumer it made: the caller, who gets no
// subscription, has none to close.
func TestASubscribeTheTopicsCloseOvertakesClosesItsConsumer(t *testing.T) {
	b := testbroker.Pulsar(t)
	client := testClient(t, b)
	var during atomic.Pointer[func()]
	var closed atomic.Int32
	o := testOptions[int](b, topic.IntCodec{})
	o.ServiceURL, o.Client = "", subscribeHookClient{Client: client, during: &during, closed: &closed}
	be := newBackend(t, o)
	st, err := be.NewTopic(ctxT(t), "overtaken", topic.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	closeTopic := st.Close
	during.Store(&closeTopic)
	sub, err := st.Subscribe(ctxT(t), topic.Balanced("billing"), topic.SubscriberOptions{})
	if sub != nil || !errors.Is(err, topic.ErrTopicClosed) {
		t.Fatalf("Subscribe = %v, %v; want no subscription and ErrTopicClosed", sub, err)
	}
	if n := closed.Load(); n != 1 {
		t.Fatalf("the consumer made for the refused subscription was closed %d times, want once", n)
	}
}
