package source_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// lead is how far the benchmark's publisher may run ahead of the handler.
const lead = 1 << 14

// benchHop measures messages published into a topic and handled (and
// acked) by a pipeline reading it with a topic source.
func benchHop(b *testing.B, mode topic.SubscriptionMode, opts topic.Options) {
	h, err := topic.NewTopic[int]("t", opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	src, err := source.New(source.Options[int]{Topic: h, Mode: mode})
	if err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	done := make(chan struct{})
	target := int64(b.N)
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "bench",
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if handled.Add(1) == target {
				close(done)
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// Keep within half the ring of the reader, so that a broadcast
		// benchmark measures delivery, not lag.
		for i%1024 == 0 && int64(i)-handled.Load() > lead {
			runtime.Gosched()
		}
		if err := h.Publish(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	if err := p.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkHopBalanced(b *testing.B) {
	benchHop(b, topic.Balanced("g"), topic.Options{})
}

func BenchmarkHopBroadcast(b *testing.B) {
	// A ring large enough that the benchmark's burst does not lag.
	benchHop(b, topic.Broadcast(), topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{Capacity: 2 * lead}})
}
