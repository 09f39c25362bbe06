package pulsartopic_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// hookClient is a client given in Options.Client that calls during, when
// set, once its Subscribe has made the consumer or its CreateProducer the
// producer, and whose consumers and producers count their Close.
type hookClient struct {
	pulsar.Client
	during               *atomic.Pointer[func()]
	consumers, producers atomic.Int32 // closed
}

// made calls the hook, if set, once the client made something.
func (c *hookClient) made() {
	if f := c.during.Load(); f != nil {
		(*f)()
	}
}

func (c *hookClient) CreateProducer(o pulsar.ProducerOptions) (pulsar.Producer, error) {
	p, err := c.Client.CreateProducer(o)
	if err == nil {
		c.made()
		p = countedProducer{p, &c.producers}
	}
	return p, err
}

func (c *hookClient) Subscribe(o pulsar.ConsumerOptions) (pulsar.Consumer, error) {
	cons, err := c.Client.Subscribe(o)
	if err == nil {
		c.made()
		cons = countedConsumer{cons, &c.consumers}
	}
	return cons, err
}

// countedProducer and countedConsumer count their Close in n.
type countedProducer struct {
	pulsar.Producer
	n *atomic.Int32
}

type countedConsumer struct {
	pulsar.Consumer
	n *atomic.Int32
}

func (p countedProducer) Close() { p.n.Add(1); p.Producer.Close() }

func (c countedConsumer) Close() { c.n.Add(1); c.Consumer.Close() }

// Guarantee: a Subscribe during which the topic closes returns
// ErrTopicClosed and closes the consumer it made: the caller, who gets no
// subscription, has none to close.
func TestASubscribeTheTopicsCloseOvertakesClosesItsConsumer(t *testing.T) {
	b := testbroker.Pulsar(t)
	client := testClient(t, b)
	var during atomic.Pointer[func()]
	c := &hookClient{Client: client, during: &during}
	o := testOptions[int](b, topic.IntCodec{})
	o.ServiceURL, o.Client = "", c
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
	if n := c.consumers.Load(); n != 1 {
		t.Fatalf("the consumer made for the refused subscription was closed %d times, want once", n)
	}
}

// Guarantee: a NewTopic during which the backend's closing begins returns
// ErrBackendClosed and closes the producer it made for the topic, which
// the closing, that does not know the topic, would leave open.
func TestANewTopicTheBackendsCloseOvertakesClosesItsProducer(t *testing.T) {
	b := testbroker.Pulsar(t)
	var during atomic.Pointer[func()]
	c := &hookClient{Client: testClient(t, b), during: &during}
	o := testOptions[int](b, topic.IntCodec{})
	o.ServiceURL, o.Client = "", c
	be := newBackend(t, o)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	// With an ended context Close returns at once: the closing, begun,
	// goes on in the background (the cleanup's Close waits for it).
	closeBackend := func() { _ = be.Close(ended) }
	during.Store(&closeBackend)
	st, err := be.NewTopic(ctxT(t), "overtaken", topic.Options{}.WithDefaults())
	if st != nil || !errors.Is(err, pulsartopic.ErrBackendClosed) {
		t.Fatalf("NewTopic = %v, %v; want no topic and ErrBackendClosed", st, err)
	}
	if n := c.producers.Load(); n != 1 {
		t.Fatalf("the producer made for the refused topic was closed %d times, want once", n)
	}
}
