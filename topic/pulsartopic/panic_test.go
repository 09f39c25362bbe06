package pulsartopic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// panickyClient is a client given in Options.Client whose Subscribe, and
// whose producers' SendAsync, panic while the matching flag is set.
type panickyClient struct {
	pulsar.Client
	subscribe, send *atomic.Bool
}

func (c panickyClient) Subscribe(o pulsar.ConsumerOptions) (pulsar.Consumer, error) {
	if c.subscribe.Load() {
		panic("client Subscribe panics")
	}
	return c.Client.Subscribe(o)
}

func (c panickyClient) CreateProducer(o pulsar.ProducerOptions) (pulsar.Producer, error) {
	p, err := c.Client.CreateProducer(o)
	if err != nil {
		return nil, err
	}
	return panickyProducer{Producer: p, send: c.send}, nil
}

type panickyProducer struct {
	pulsar.Producer
	send *atomic.Bool
}

func (p panickyProducer) SendAsync(ctx context.Context, m *pulsar.ProducerMessage, f func(pulsar.MessageID, *pulsar.ProducerMessage, error)) {
	if p.send.Load() {
		panic("producer SendAsync panics")
	}
	p.Producer.SendAsync(ctx, m, f)
}

// panics reports whether f panicked.
func panics(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

// within runs f and fails t if it has not returned by d.
func within(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s has not returned %v after a panic in the client was recovered", what, d)
	}
}

// closeBound is how long a Close after a recovered panic may take: well
// below DefaultSendTimeout, which Close waits for a publish slot never
// given back.
const closeBound = 10 * time.Second

func panickyBackend(t *testing.T) (topic.State[int], *atomic.Bool, *atomic.Bool) {
	t.Helper()
	b := testbroker.Pulsar(t)
	client := testClient(t, b)
	var subscribe, send atomic.Bool
	o := testOptions[int](b, topic.IntCodec{})
	o.ServiceURL, o.Client = "", panickyClient{Client: client, subscribe: &subscribe, send: &send}
	be := newBackend(t, o)
	st, err := be.NewTopic(ctxT(t), "panicky", topic.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	return st, &subscribe, &send
}

// Guarantee: a client whose SendAsync panics leaves the topic's lock and
// its publish slot free once the panic is recovered by the publisher's
// caller: later publishes go through, and Close returns at once rather
// than waiting for ever for the send lock (or for the send timeout for the
// slot).
func TestCloseReturnsAfterAPanicInSendAsyncWasRecovered(t *testing.T) {
	st, _, send := panickyBackend(t)
	send.Store(true)
	for range 3 {
		if !panics(func() { _, _ = st.Publish(ctxT(t), topic.Envelope[int]{Value: 1}, topic.Block) }) {
			t.Fatal("a publish through a SendAsync that panics did not panic")
		}
	}
	send.Store(false)
	within(t, "a publish", closeBound, func() {
		if _, err := st.Publish(ctxT(t), topic.Envelope[int]{Value: 2}, topic.Block); err != nil {
			t.Errorf("a publish after the panics: %v", err)
		}
	})
	within(t, "the topic's Close", closeBound, st.Close)
}

// Guarantee: a client whose Subscribe panics leaves the topic usable once
// the panic is recovered by the subscriber's caller: the next Subscribe
// and Close return.
func TestSubscribeAndCloseReturnAfterAPanicInSubscribeWasRecovered(t *testing.T) {
	st, subscribe, _ := panickyBackend(t)
	subscribe.Store(true)
	if !panics(func() { _, _ = st.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{}) }) {
		t.Fatal("a subscribe through a client Subscribe that panics did not panic")
	}
	subscribe.Store(false)
	within(t, "the next Subscribe", closeBound, func() {
		s, err := st.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
		if err != nil {
			t.Errorf("the next Subscribe: %v", err)
			return
		}
		s.Close()
	})
	within(t, "the topic's Close", closeBound, st.Close)
}
