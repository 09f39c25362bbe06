package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/internal/safehooks"
	"github.com/boulevard-go/boulevard/telemetry"
)

// hookStart calls the PipelineStart hook, if any, with the stage names. A
// panic in the hook is logged and the pipeline starts all the same.
func (p *Pipeline[In, Out]) hookStart(ctx context.Context) {
	h := p.opts.Telemetry
	if h == nil || h.PipelineStart == nil {
		return
	}
	defer panics.Log(ctx, p.log, safehooks.Panicked, slog.String("hook", "PipelineStart"))
	h.PipelineStart(ctx, telemetry.Pipeline{Name: p.opts.Name, Stages: p.stageNames()})
}

// hookStop calls the PipelineStop hook, if any, once the pipeline has
// stopped. A panic in the hook is logged and the pipeline's Done is closed
// all the same.
func (p *Pipeline[In, Out]) hookStop(started time.Time) {
	h := p.opts.Telemetry
	if h == nil || h.PipelineStop == nil {
		return
	}
	defer panics.Log(context.Background(), p.log, safehooks.Panicked, slog.String("hook", "PipelineStop"))
	h.PipelineStop(context.Background(), telemetry.Pipeline{Name: p.opts.Name, Stages: p.stageNames(), Err: p.Err(), Duration: time.Since(started)})
}

// stageNames lists the producer stages, the processors and the batchers.
func (p *Pipeline[In, Out]) stageNames() []string {
	t := p.Topology()
	names := append([]string(nil), t.Producer.Stages...)
	names = append(names, t.Processors.Name)
	for _, b := range t.Batchers {
		names = append(names, b.Stage)
	}
	return names
}
