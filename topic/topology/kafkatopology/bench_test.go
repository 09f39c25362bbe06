package kafkatopology

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// BenchmarkPublishToAck measures a publish → broker ack → pipeline (two
// processors) → settle round per message through a Kafka topology (a
// hold, a DLQ) on kfake, with 8 publishers producing at once (each
// publish waits for the broker's acknowledgement, so one publisher would
// measure the round trip alone).
func BenchmarkPublishToAck(b *testing.B) {
	be := newBackend(b, newCluster(b).ListenAddrs())
	q, err := be.Declare(context.Background(), mustBuild(b, topology.New("bench").Hold(time.Second).DLQ()))
	if err != nil {
		b.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[msg]{Queues: q})
	if err != nil {
		b.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[msg, msg]{
		Name:     "bench",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[msg]{Source: src},
		Processors: processor.Options[msg, msg]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[msg]) (msg, error) {
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
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[msg]{})
	if err != nil {
		b.Fatal(err)
	}
	const publishers = 8
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range publishers {
		wg.Go(func() {
			for i := w; i < b.N; i += publishers {
				if err := pub.Publish(context.Background(), msg{N: i}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for src.Stats().Acked < uint64(b.N) {
		time.Sleep(100 * time.Microsecond) // poll: the benchmark's end condition
	}
}

func mustBuild(b *testing.B, tb *topology.Builder) *topology.Topology {
	t, err := tb.Build()
	if err != nil {
		b.Fatal(err)
	}
	return t
}
