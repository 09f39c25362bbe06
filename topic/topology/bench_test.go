package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// BenchmarkSource measures a publish → pipeline → ack round per message
// through the in-memory backend: plain, and sequenced over 64 keys. It is
// the Kafka and Pulsar backends' publish-to-ack benchmark
// (topologytest.PublishToAck) with one publisher.
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
			m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			q, err := m.Declare(context.Background(), top)
			if err != nil {
				b.Fatal(err)
			}
			topologytest.PublishToAck(b, q, 1, time.Minute)
		})
	}
}

// BenchmarkSourceRetried measures a message that fails once and is acked
// on its second delivery, through the in-memory backend: sent straight
// back to its queue without hold queues ("requeue"), and through a hold
// queue of a second ("hold"). In "hold" every message waits its second
// out, so ns/op is not a figure there; run it with -benchtime Nx.
func BenchmarkSourceRetried(b *testing.B) {
	for _, c := range []struct {
		name string
		b    *topology.Builder
	}{
		{"requeue", topology.New("bench").DLQ()},
		{"hold", topology.New("bench").Hold(time.Second).DLQ()},
	} {
		b.Run(c.name, func(b *testing.B) { benchRetried(b, c.b) })
	}
}

func benchRetried(b *testing.B, builder *topology.Builder) {
	top, err := builder.Build()
	if err != nil {
		b.Fatal(err)
	}
	// A run may hold all its messages at once.
	m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{HoldCapacity: topology.MaxMemoryHoldCapacity})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	q, err := m.Declare(context.Background(), top)
	if err != nil {
		b.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[topologytest.Msg]{Queues: q})
	if err != nil {
		b.Fatal(err)
	}
	errFirst := errors.New("first delivery fails")
	p, err := pipeline.New(pipeline.Options[topologytest.Msg, topologytest.Msg]{
		Name:     "bench",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[topologytest.Msg]{Source: src},
		Processors: processor.Options[topologytest.Msg, topologytest.Msg]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[topologytest.Msg]) (topologytest.Msg, error) {
			if d, ok := topology.DeliveryOf(m); ok && d.Retries == 0 {
				return m.Data, errFirst
			}
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
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[topologytest.Msg]{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := pub.Publish(context.Background(), topologytest.Msg{N: i}); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for src.Stats().Acked < uint64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d acked after a minute", src.Stats().Acked, b.N)
		}
		time.Sleep(100 * time.Microsecond) // poll: the benchmark's end condition
	}
}
