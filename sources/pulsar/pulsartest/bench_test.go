package pulsartest

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// BenchmarkProduceConsume measures end-to-end throughput through the broker
// with pulsar-client-go on both sides: a batching producer and a consumer
// that receives and acks every message.
func BenchmarkProduceConsume(b *testing.B) {
	for _, batching := range []bool{true, false} {
		name := "batched"
		if !batching {
			name = "unbatched"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			br, err := Start(context.Background(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: br.URL(), OperationTimeout: 10 * time.Second, Logger: plog.DefaultNopLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: "bench", SubscriptionName: "s"})
			if err != nil {
				b.Fatal(err)
			}
			defer cons.Close()
			prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "bench", DisableBatching: !batching, SendTimeout: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer prod.Close()
			payload := make([]byte, 100)
			ctx := context.Background()
			b.ResetTimer()
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				for range b.N {
					prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
				_ = prod.FlushWithCtx(ctx)
			}()
			for range b.N {
				m, err := cons.Receive(ctx)
				if err != nil {
					b.Fatal(err)
				}
				_ = cons.Ack(m)
			}
			b.StopTimer()
			<-sent
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
