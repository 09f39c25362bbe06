package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// BenchmarkSourceKfake reads, with each client, a backlog of 20000 records
// from 4 partitions of an in-process kfake cluster through a pipeline whose handlers return the
// payload; each iteration reads the whole backlog with a fresh group.
func BenchmarkSourceKfake(b *testing.B) {
	for _, cl := range clients {
		b.Run(cl.name, func(b *testing.B) { benchSource(b, cl) })
	}
}

func benchSource(b *testing.B, cl client) {
	const parts, n = 4, 20000
	c := newCluster(b, parts)
	produce(b, c, parts, 0, n)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		group := fmt.Sprintf("g-bench-%d", i)
		opts := sourceOptions(c, group)
		opts.CommitInterval = time.Second
		var handled atomic.Int64
		p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
			Name:            "bench",
			Logger:          slog.New(slog.DiscardHandler),
			ShutdownTimeout: 10 * time.Second,
			Producer:        producer.Options[[]byte]{Source: cl.new(b, opts)},
			Processors: processor.Options[[]byte, []byte]{
				Concurrency: 2,
				Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
					handled.Add(1)
					return m.Data, nil
				},
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for handled.Load() < n {
			if time.Now().After(deadline) {
				b.Fatal("backlog not handled within a minute")
			}
			time.Sleep(time.Millisecond)
		}
		stopPipeline(b, p)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}
