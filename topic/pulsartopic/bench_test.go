package pulsartopic_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
)

// BenchmarkPublishSubscribe measures one message's trip through a Pulsar
// topic on an in-process broker: publishers publishing (each publish waits
// for the broker's receipt) while one balanced member receives and acks,
// through the backend and through pulsar-client-go alone (producer Send,
// consumer Receive and Ack on a Shared subscription, the same receiver
// queue and no batching). ns/op is per message.
func BenchmarkPublishSubscribe(b *testing.B) {
	for _, pubs := range []int{1, 4} {
		b.Run(fmt.Sprintf("backend/publishers=%d", pubs), func(b *testing.B) { benchBackend(b, pubs) })
		b.Run(fmt.Sprintf("client/publishers=%d", pubs), func(b *testing.B) { benchClient(b, pubs) })
	}
}

// publishAll runs pubs goroutines that publish b.N values between them.
func publishAll(b *testing.B, pubs int, publish func(v int) error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for p := range pubs {
		wg.Go(func() {
			for v := p; v < b.N; v += pubs {
				if err := publish(v); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	return &wg
}

func benchBackend(b *testing.B, pubs int) {
	br := testbroker.Pulsar(b)
	be := newBackend(b, testOptions[int](br, topic.IntCodec{}))
	h, err := topic.NewTopic[int]("bench", topic.Options{}, be)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	sub, err := h.Subscribe(b.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	wg := publishAll(b, pubs, func(v int) error { return h.Publish(ctx, v) })
	for range b.N {
		it, err := sub.Receive(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := sub.Ack(it.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	wg.Wait()
}

func benchClient(b *testing.B, pubs int) {
	br := testbroker.Pulsar(b)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: br.URL(), OperationTimeout: 5 * time.Second, Logger: quietClientLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	full := pulsartest.FullTopicName("bench")
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{Topic: full, SubscriptionName: "g", Type: pulsar.Shared,
		ReceiverQueueSize: 960, MessageChannel: make(chan pulsar.ConsumerMessage, 64)})
	if err != nil {
		b.Fatal(err)
	}
	defer consumer.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: full, DisableBatching: true, SendTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	wg := publishAll(b, pubs, func(v int) error {
		_, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: binary.BigEndian.AppendUint64(nil, uint64(v))})
		return err
	})
	for range b.N {
		m, err := consumer.Receive(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := consumer.Ack(m); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	wg.Wait()
}
