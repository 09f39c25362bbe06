package pulsar_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// BenchmarkSource measures one message from the in-process broker through
// the source and a pipeline with a trivial handler to its ack; allocations
// include pulsar-client-go's and the broker's.
func BenchmarkSource(b *testing.B) { benchSource(b, bpulsar.Shared, false) }

// BenchmarkSourceKeyShared is BenchmarkSource on a KeyShared subscription,
// the messages spread over 100 keys: each message carries a partition key
// and the processors are partitioned by it.
func BenchmarkSourceKeyShared(b *testing.B) { benchSource(b, bpulsar.KeyShared, true) }

// benchSource runs BenchmarkSource on a subscription of type typ, the
// messages keyed when keyed.
func benchSource(b *testing.B, typ bpulsar.SubscriptionType, keyed bool) {
	ctx := context.Background()
	broker, err := pulsartest.Start(ctx, pulsartest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer broker.Close()
	client, err := newClient(broker.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	msgs := make([]pulsartest.Message, 100)
	for i := range msgs {
		msgs[i] = pulsartest.Message{Payload: make([]byte, 100)}
		if keyed {
			msgs[i].Key = strconv.Itoa(i)
		}
	}
	for i := 0; i < b.N; i += len(msgs) {
		if _, err := broker.PublishBatch(ctx, "bench", msgs[:min(len(msgs), b.N-i)]...); err != nil {
			b.Fatal(err)
		}
	}
	var handled atomic.Int64
	all := make(chan struct{})
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:     "bench",
		Producer: producer.Options[[]byte]{Source: bpulsar.New(bpulsar.Options{Client: client, Topics: []string{"bench"}, Subscription: "sub", SubscriptionType: typ, Consumer: earliest()})},
		Processors: processor.Options[[]byte, []byte]{Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
			if handled.Add(1) == int64(b.N) {
				close(all)
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-all
	b.StopTimer()
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.Stop(stopCtx); err != nil {
		b.Fatal(err)
	}
}
