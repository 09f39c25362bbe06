package processing

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/internal/benchsrc"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// benchHooks are the hook sets BenchmarkHandleChunkHooks compares: none,
// the chunk hooks only (coarse), every hook an empty function (durations
// sampled as by default), and the same without durations.
func benchHooks() []struct {
	name  string
	hooks *telemetry.Hooks
} {
	all := benchsrc.EmptyHooks()
	// A processor calls only these (no pipeline or batch around it).
	all.PipelineStart, all.PipelineStop = nil, nil
	all.BatchEmit, all.BatchStart, all.BatchStop = nil, nil, nil
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
			benchChunks(b, s.newProcessor(0), chunk)
		})
	}
}

// benchChunks has p handle chunks of chunk fresh messages until b is
// done, checks that every message was acknowledged, and reports the time
// per message (ns/msg).
func benchChunks(b *testing.B, p *worker[int, int], chunk int) {
	ack := &benchsrc.Counter{}
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
	if ack.N.Load() != int64(b.N*chunk) {
		b.Fatalf("%d messages acknowledged, want %d", ack.N.Load(), b.N*chunk)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunk), "ns/msg")
}
