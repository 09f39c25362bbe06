package pulsartopology_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// BenchmarkPublishToAck measures a publish → pipeline (two processors) →
// ack round per message through the Pulsar backend on an in-process
// broker: plain (a hold and a DLQ declared, unused), and sequenced over 64
// keys. Publishers run on 4 goroutines, each waiting for its receipts.
func BenchmarkPublishToAck(b *testing.B) {
	for _, c := range []struct {
		name string
		b    *topology.Builder
	}{
		{"plain", topology.New("bench").Hold(time.Second).DLQ()},
		{"sequenced", topology.New("bench").Sequenced(topology.Skip).Hold(time.Second).DLQ()},
	} {
		b.Run(c.name, func(b *testing.B) {
			top := build(b, c.b)
			be := newBackend(b, options(startBroker(b), topic.Codec[int](topic.IntCodec{})))
			q, err := be.Declare(context.Background(), top)
			if err != nil {
				b.Fatal(err)
			}
			src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q})
			if err != nil {
				b.Fatal(err)
			}
			p, err := pipeline.New(pipeline.Options[int, int]{
				Name:     "bench",
				Logger:   slog.New(slog.DiscardHandler),
				Producer: producer.Options[int]{Source: src},
				Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
					return m.Data, nil
				}},
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Stop(context.Background()) }()
			opts := topology.PublisherOptions[int]{}
			keys := make([]string, 64)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			if _, seq := top.Sequenced(); seq {
				opts.Key = func(v int) string { return keys[v%64] }
			}
			pub, err := topology.NewPublisher(q, opts)
			if err != nil {
				b.Fatal(err)
			}
			const publishers = 4
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range publishers {
				wg.Go(func() {
					for i := w; i < b.N; i += publishers {
						if err := pub.Publish(context.Background(), i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			deadline := time.Now().Add(time.Minute)
			for src.Stats().Acked < uint64(b.N) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d acked after a minute", src.Stats().Acked, b.N)
				}
				time.Sleep(100 * time.Microsecond) // poll: the benchmark's end condition
			}
		})
	}
}
