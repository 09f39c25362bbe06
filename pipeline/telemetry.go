package pipeline

import (
	"context"
	"time"

	"github.com/boulevard-go/boulevard/telemetry"
)

// hookStart calls the PipelineStart hook, if any, with the stage names.
func (p *Pipeline[In, Out]) hookStart(ctx context.Context) {
	h := p.opts.Telemetry
	if h == nil || h.PipelineStart == nil {
		return
	}
	h.PipelineStart(ctx, telemetry.Pipeline{Name: p.opts.Name, Stages: p.stageNames()})
}

// hookStop calls the PipelineStop hook, if any, once the pipeline has
// stopped.
func (p *Pipeline[In, Out]) hookStop(started time.Time) {
	h := p.opts.Telemetry
	if h == nil || h.PipelineStop == nil {
		return
	}
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
