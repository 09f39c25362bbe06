package topology_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// BenchmarkSource measures a publish → pipeline → ack round per message
// through the in-memory backend: plain, and sequenced over 64 keys.
func BenchmarkSource(b *testing.B) {
	for _, c := range []struct {
		name string
		b    *topology.Builder
	}{
		{"plain", topology.New("bench").Hold(time.Second).DLQ()},
		{"sequenced", topology.New("bench").Sequenced(topology.Skip).Hold(time.Second).DLQ()},
	} {
		b.Run(c.name, func(b *testing.B) {
			top, err := c.b.Build()
			if err != nil {
				b.Fatal(err)
			}
			m, _ := topology.NewMemory[int](topology.MemoryOptions{})
			defer m.Close()
			q, _ := m.Declare(context.Background(), top)
			src, _ := topology.NewSource(topology.SourceOptions[int]{Queues: q})
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
			defer p.Stop(context.Background())
			opts := topology.PublisherOptions[int]{}
			keys := make([]string, 64)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			if _, seq := top.Sequenced(); seq {
				opts.Key = func(v int) string { return keys[v%64] }
			}
			pub, _ := topology.NewPublisher(q, opts)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := pub.Publish(context.Background(), i); err != nil {
					b.Fatal(err)
				}
			}
			for src.Stats().Acked < uint64(b.N) {
				time.Sleep(100 * time.Microsecond) // poll: the benchmark's end condition
			}
		})
	}
}
