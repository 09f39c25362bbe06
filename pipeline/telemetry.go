package pipeline

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/internal/safehooks"
	"github.com/boulevard-go/boulevard/telemetry"
)

// hookStart calls the PipelineStart hook, if any, with the stage names. A
// panic in the hook is logged and the pipeline starts all the same; so is
// an exit (runtime.Goexit), which ends the goroutine that called Start
// or Run (Start runs the pipeline from a deferred call, and the pipeline
// then watches Run's context itself).
func (p *Pipeline[In, Out]) hookStart(ctx context.Context) {
	h := p.opts.Telemetry
	if h == nil || h.PipelineStart == nil {
		return
	}
	p.callPipelineHook(ctx, "PipelineStart", h.PipelineStart, telemetry.Pipeline{Name: p.opts.Name, Stages: p.stageNames()})
}

// hookStop calls the PipelineStop hook, if any, once the pipeline has
// stopped. A panic or an exit (runtime.Goexit) in the hook is logged and
// the pipeline's Done is closed all the same (run closes it from a
// deferred call).
func (p *Pipeline[In, Out]) hookStop(started time.Time) {
	h := p.opts.Telemetry
	if h == nil || h.PipelineStop == nil {
		return
	}
	p.callPipelineHook(context.Background(), "PipelineStop", h.PipelineStop,
		telemetry.Pipeline{Name: p.opts.Name, Stages: p.stageNames(), Err: p.Err(), Duration: time.Since(started)})
}

// callPipelineHook calls hook f, named name, with e: a panic is recovered
// and logged with safehooks.Panicked, an exit (runtime.Goexit) is logged
// with HookExitedLog and the stack of the exit, and goes on.
func (p *Pipeline[In, Out]) callPipelineHook(ctx context.Context, name string, f func(context.Context, telemetry.Pipeline), e telemetry.Pipeline) {
	exited := true
	defer func() {
		if exited {
			p.log.ErrorContext(ctx, HookExitedLog, slog.String("hook", name), slog.String("stack", string(debug.Stack())))
		}
	}()
	func() {
		defer panics.Log(ctx, p.log, safehooks.Panicked, slog.String("hook", name))
		f(ctx, e)
	}()
	exited = false
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

// HookExitedLog is the message of the error line the pipeline logs when
// its PipelineStart or PipelineStop hook ended its goroutine
// (runtime.Goexit); its "hook" attribute names the hook.
const HookExitedLog = "telemetry hook ended its goroutine (runtime.Goexit); the pipeline goes on"
