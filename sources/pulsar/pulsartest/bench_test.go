package pulsartest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
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

// BenchmarkDelayedDelivery measures the broker's delayed-delivery timer on
// a Shared subscription that holds many messages for later: "wake" is one
// wake-up of the timer with nothing due (what every newly held message
// used to cost), "release" publishes one more delayed message and runs
// the wake-up at its delivery time, which sends it to the consumer. The
// cost should not grow with the messages held.
func BenchmarkDelayedDelivery(b *testing.B) {
	for _, held := range []int{1_000, 10_000, 100_000} {
		for _, name := range []string{"wake", "release"} {
			b.Run(fmt.Sprintf("%s/held=%d", name, held), func(b *testing.B) {
				br, err := Start(context.Background(), Options{Logger: slog.New(slog.DiscardHandler), MaxUnackedPerConsumer: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer br.Close()
				r := dialRaw(b, br)
				r.connect(maxProtocolVersion)
				rawSubscribe(r, "delayed", "s", subShared, 1, 1)
				rawFlow(r, 1, math.MaxUint32)
				pingThrough(r) // the permits are granted
				drained := make(chan struct{})
				go func() {
					defer close(drained)
					_, _ = io.Copy(io.Discard, r.nc)
				}()
				defer func() {
					_ = r.nc.Close()
					<-drained
				}()
				// The messages held are due in a hundred years, each a
				// millisecond after the previous; those released one by
				// one in a year, in turn.
				now := time.Now()
				far, soon := now.AddDate(100, 0, 0), now.AddDate(1, 0, 0)
				msgs := make([]Message, held)
				for i := range msgs {
					msgs[i] = Message{Payload: []byte("x"), DeliverAt: far.Add(time.Duration(i) * time.Millisecond)}
				}
				ctx := context.Background()
				if _, err := br.Publish(ctx, "delayed", msgs...); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					at := now
					if name == "release" {
						at = soon.Add(time.Duration(i) * time.Millisecond)
						if _, err := br.Publish(ctx, "delayed", Message{Payload: []byte("x"), DeliverAt: at}); err != nil {
							b.Fatal(err)
						}
					}
					br.mu.Lock()
					br.releaseDelayedLocked(at)
					br.mu.Unlock()
				}
				b.StopTimer()
				if name == "release" {
					if st := br.Consumers("delayed", "s")[0]; st.Dispatched != int64(b.N) {
						b.Fatalf("dispatched %d, want %d", st.Dispatched, b.N)
					}
				}
			})
		}
	}
}
