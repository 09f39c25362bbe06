package pipeline_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// emptyHooks has every hook set to a function that does nothing.
var emptyHooks = &telemetry.Hooks{
	PipelineStart:    func(context.Context, telemetry.Pipeline) {},
	PipelineStop:     func(context.Context, telemetry.Pipeline) {},
	ChunkStart:       func(context.Context, telemetry.Chunk) {},
	ChunkStop:        func(context.Context, telemetry.Chunk) {},
	MessageStart:     func(context.Context, telemetry.Message) {},
	MessageStop:      func(context.Context, telemetry.Message) {},
	MessageException: func(context.Context, telemetry.Message) {},
	HandleFailed:     func(context.Context, telemetry.Failed) {},
	BatchEmit:        func(context.Context, telemetry.Batch) {},
	BatchStart:       func(context.Context, telemetry.Batch) {},
	BatchStop:        func(context.Context, telemetry.Batch) {},
}

// coarseHooks are the chunk, batch and pipeline hooks of emptyHooks,
// without the per-message ones.
var coarseHooks = func() *telemetry.Hooks {
	h := *emptyHooks
	h.MessageStart, h.MessageStop, h.MessageException = nil, nil, nil
	return &h
}()

// BenchmarkTelemetry: source → 2 processors → batcher of 100, with the
// hooks off, with the chunk, batch and pipeline hooks set to empty
// functions, and with every hook set.
func BenchmarkTelemetry(b *testing.B) {
	for _, tc := range []struct {
		name  string
		hooks *telemetry.Hooks
	}{{"off", nil}, {"coarse", coarseHooks}, {"all", emptyHooks}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			ack := &benchAcker{}
			start := make(chan struct{})
			slab := make([]message.Message[int], b.N)
			runtime.GC()
			next := func(i int) *message.Message[int] {
				m := &slab[i]
				m.Init(i, ack, uint64(i))
				return m
			}
			p, err := pipeline.New(pipeline.Options[int, int]{
				Name:       "bench",
				Telemetry:  tc.hooks,
				Producer:   producer.Options[int]{Source: &benchSource[int]{n: b.N, start: start, next: next}},
				Processors: processor.Options[int, int]{Concurrency: benchProcessors, Handle: benchIntHandle},
				Batchers:   []batcher.Options[int]{{Name: "default", BatchSize: 100, Handle: benchBatchHandle[int]}},
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			close(start)
			<-p.Done()
			b.StopTimer()
			runtime.ReadMemStats(&after)
			if ok := ack.ok.Load(); ok != int64(b.N) {
				b.Fatalf("acknowledged %d of %d messages", ok, b.N)
			}
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/msg")
		})
	}
}
