package processing

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// countAcks counts acknowledged messages.
type countAcks struct{ n int }

func (c *countAcks) Ack(_ context.Context, ok, failed []acker.Outcome) { c.n += len(ok) + len(failed) }

// benchHooks are the hook sets BenchmarkHandleChunkHooks compares: none,
// the chunk hooks only (coarse), every hook an empty function (durations
// sampled as by default), and the same without durations.
func benchHooks() []struct {
	name  string
	hooks *telemetry.Hooks
} {
	all := &telemetry.Hooks{
		ChunkStart:       func(context.Context, telemetry.Chunk) {},
		ChunkStop:        func(context.Context, telemetry.Chunk) {},
		MessageStart:     func(context.Context, telemetry.Message) {},
		MessageStop:      func(context.Context, telemetry.Message) {},
		MessageException: func(context.Context, telemetry.Message) {},
		HandleFailed:     func(context.Context, telemetry.Failed) {},
	}
	untimed := *all
	untimed.NoDurations = true
	coarse := *all
	coarse.MessageStart, coarse.MessageStop, coarse.MessageException = nil, nil, nil
	return []struct {
		name  string
		hooks *telemetry.Hooks
	}{{"off", nil}, {"coarse", &coarse}, {"all", all}, {"all-untimed", &untimed}}
}

// BenchmarkHandleChunkHooks is one processor handling chunks of 10
// messages with a handler that does next to nothing, on one goroutine, with
// the telemetry hooks off and with every processor hook set to an empty
// function. The difference in ns/msg between the sub-benchmarks is what
// the hooks add to each message, free of the scheduling noise of a whole
// pipeline; compare it with a message's CPU time in the pipeline
// benchmarks.
func BenchmarkHandleChunkHooks(b *testing.B) {
	const chunk = 10
	for _, hs := range benchHooks() {
		b.Run(hs.name, func(b *testing.B) {
			opts := processor.Options[int, int]{
				Handle:      func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data*2 + 1, nil },
				Concurrency: 1,
				MaxDemand:   chunk,
			}.WithDefaults()
			s := New(opts, Config[int]{Name: "bench", Hooks: hs.hooks})
			p := s.newProcessor(0)
			ack := &countAcks{}
			msgs := make([]message.Message[int], chunk)
			ptrs := make([]*message.Message[int], chunk)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				for i := range msgs {
					msgs[i].Init(i, ack, uint64(i))
					ptrs[i] = &msgs[i]
				}
				p.handleChunk(ctx, ptrs)
			}
			if ack.n != b.N*chunk {
				b.Fatalf("%d messages acknowledged, want %d", ack.n, b.N*chunk)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunk), "ns/msg")
		})
	}
}
