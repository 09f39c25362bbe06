package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/producer/sourcetest"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// The Pulsar source passes the source conformance suite on pulsartest: one
// topic (one consumer, one feed per stage), a shared subscription, outcomes
// read back as the acks the broker counted. A failure is a consumer closed
// under its stage, which makes Run fail. An outage is the broker dropping
// every connection and refusing the subscription's consumers until it is
// restored: each attempt of the consumer to reconnect fails, as at a
// broker out of reach, and the broker keeps the topic and its acks, which
// a broker stopped and started again would not.
// errOutOfReach is what the broker answers a subscribe with during an
// outage.
var errOutOfReach = errors.New("broker out of reach")

func TestConformance(t *testing.T) {
	const topic, sub = "conformance", "sub"
	sourcetest.Run(t, sourcetest.Harness[[]byte]{
		Start: func(t testing.TB, n int) sourcetest.Fixture[[]byte] {
			tt, ok := t.(*testing.T)
			if !ok {
				t.Fatalf("the Pulsar fixture needs a *testing.T, got %T", t)
			}
			e := newEnv(tt)
			b := e.broker
			// A client of the source's own, which reports its consumers'
			// failed reconnections (Client.WatchReconnects).
			client, err := bpulsar.NewClient(pulsar.ClientOptions{URL: b.URL(), OperationTimeout: 5 * time.Second}, testLogger())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			var (
				mu      sync.Mutex
				sources []*bpulsar.Source
			)
			return sourcetest.Fixture[[]byte]{
				NewSource: func() (producer.Source[[]byte], error) {
					src := bpulsar.New(bpulsar.Options{Client: client, Topics: []string{topic}, Subscription: sub, Consumer: earliest()})
					mu.Lock()
					sources = append(sources, src)
					mu.Unlock()
					return src, nil
				},
				Publish: func(ctx context.Context) ([]string, error) {
					keys := make([]string, n)
					msgs := make([]pulsartest.Message, n)
					for i := range msgs {
						keys[i] = fmt.Sprintf("m-%d", i)
						msgs[i] = pulsartest.Message{Payload: []byte(keys[i])}
					}
					_, err := b.Publish(ctx, topic, msgs...)
					return keys, err
				},
				Key: func(m *message.Message[[]byte]) string { return string(m.Data) },
				Fetched: func(context.Context) (int, error) {
					var pushed int64
					for _, c := range b.Consumers(topic, sub) {
						pushed += c.Dispatched
					}
					return int(pushed), nil
				},
				Settled: func(context.Context) (int, error) {
					var acked int64
					for _, c := range b.Consumers(topic, sub) {
						acked += c.Acked
					}
					return int(acked), nil
				},
				Fail: func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					for _, src := range sources {
						if !src.CloseConsumerForTest() {
							return errors.New("no open consumer to close")
						}
					}
					return nil
				},
				Outage: func(context.Context) (func(context.Context) error, error) {
					b.RefuseSubscribe(topic, sub, errOutOfReach)
					b.DropConnections()
					return func(context.Context) error {
						b.RefuseSubscribe(topic, sub, nil)
						return nil
					}, nil
				},
			}
		},
	})
}
