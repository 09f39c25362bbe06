package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/producer/sourcetest"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// The Pulsar source passes the source conformance suite on pulsartest: one
// topic (one consumer, one feed per stage), a shared subscription, outcomes
// read back as the acks the broker counted. A failure is a consumer closed
// under its stage, which makes Run fail.
func TestConformance(t *testing.T) {
	const topic, sub = "conformance", "sub"
	sourcetest.Run(t, sourcetest.Harness[[]byte]{
		Start: func(t testing.TB, n int) sourcetest.Fixture[[]byte] {
			tt, ok := t.(*testing.T)
			if !ok {
				t.Fatalf("the Pulsar fixture needs a *testing.T, got %T", t)
			}
			e := newEnv(tt)
			b, client := e.broker, e.client
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
			}
		},
	})
}
