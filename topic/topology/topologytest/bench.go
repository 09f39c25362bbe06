package topologytest

import (
	"context"
	"fmt"
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

// PublishToAck is the timed part of a backend's publish-to-ack benchmark:
// a pipeline (two processors, a handler that succeeds) consumes q while
// publishers goroutines publish b.N messages between them (over 64 keys on
// a sequenced topology), and it returns once the source has acked them all
// (failing after bound). It reports allocations; the caller declares q
// beforehand, outside the timer.
func PublishToAck(b *testing.B, q topology.Queues[Msg], publishers int, bound time.Duration) {
	b.Helper()
	src, err := topology.NewSource(topology.SourceOptions[Msg]{Queues: q})
	if err != nil {
		b.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[Msg, Msg]{
		Name:     "bench",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[Msg]{Source: src},
		Processors: processor.Options[Msg, Msg]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[Msg]) (Msg, error) {
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
	opts := topology.PublisherOptions[Msg]{}
	var keys [64]string
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	if _, seq := q.Topology().Sequenced(); seq {
		opts.Key = func(m Msg) string { return m.Key }
	}
	pub, err := topology.NewPublisher(q, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range publishers {
		wg.Go(func() {
			for i := w; i < b.N; i += publishers {
				if err := pub.Publish(context.Background(), Msg{Key: keys[i%len(keys)], N: i}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(bound)
	for src.Stats().Acked < uint64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d acked after %s", src.Stats().Acked, b.N, bound)
		}
		time.Sleep(100 * time.Microsecond) // poll: the benchmark's end condition
	}
}
