package pipeline_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Guarantee: a pipeline stopped from its PipelineStart hook starts its
// sources stopped: the source's Run is called with its context already
// ended, so it fetches nothing that the stop would then drain. No stage
// runs before the hook returns, so the pipeline can tell the sources to
// stay stopped before any of them runs; a few pipelines of several stages
// are run so that a source started by mistake shows.
func TestStopFromPipelineStartHookStartsTheSourcesStopped(t *testing.T) {
	for range 50 {
		var live atomic.Int32
		src := producer.SourceFunc[uint64](func(ctx context.Context, _ *producer.Stage[uint64]) error {
			if ctx.Err() == nil {
				live.Add(1)
			}
			<-ctx.Done()
			return ctx.Err()
		})
		var p *pipeline.Pipeline[uint64, uint64]
		hooks := &telemetry.Hooks{PipelineStart: func(ctx context.Context, _ telemetry.Pipeline) {
			if err := p.Stop(ctx); err != nil {
				t.Errorf("Stop from the PipelineStart hook = %v, want nil", err)
			}
		}}
		p = mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "stopped-in-hook",
			Logger:     slog.New(slog.DiscardHandler),
			Telemetry:  hooks,
			Producer:   producer.Options[uint64]{Source: src, Concurrency: 4},
			Processors: processor.Options[uint64, uint64]{Handle: identity},
		})
		ctx := ctxT(t, 10*time.Second)
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(ctx); err != nil {
			t.Fatalf("Stop = %v, want nil", err)
		}
		if n := live.Load(); n != 0 {
			t.Fatalf("the source's Run was called %d time(s) with a live context after the PipelineStart hook stopped the pipeline, want none", n)
		}
	}
}
