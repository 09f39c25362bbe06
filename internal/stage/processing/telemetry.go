package processing

import (
	"context"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// chunkSpan is a chunk's event and when it started.
type chunkSpan struct {
	e     telemetry.Chunk
	start time.Time
}

// chunkStart calls the ChunkStart hook. Only called with hooks set.
func (p *worker[In, Out]) chunkStart(ctx context.Context, n int) chunkSpan {
	e := telemetry.Chunk{Stage: p.s.name, Processor: p.index, Size: n}
	if h := p.s.hooks.ChunkStart; h != nil {
		h(ctx, e)
	}
	return chunkSpan{e: e, start: time.Now()}
}

// chunkStop calls the ChunkStop hook with the chunk's duration.
func (p *worker[In, Out]) chunkStop(ctx context.Context, sp chunkSpan) {
	if h := p.s.hooks.ChunkStop; h != nil {
		sp.e.Duration = time.Since(sp.start)
		h(ctx, sp.e)
	}
}

// handleHooked calls the handler, with the message hooks around it when
// they are set.
func (p *worker[In, Out]) handleHooked(ctx context.Context, m *message.Message[In]) (Out, error) {
	hs := p.s.hooks
	if hs == nil || (hs.MessageStart == nil && hs.MessageStop == nil && hs.MessageException == nil) {
		return p.handleTimed(ctx, m)
	}
	e := telemetry.Message{Stage: p.s.name, Processor: p.index}
	if hs.MessageStart != nil {
		hs.MessageStart(ctx, e)
	}
	start := time.Now()
	out, err := p.handleTimed(ctx, m)
	e.Duration = time.Since(start)
	e.Err = err
	if err == nil && m.Failed() {
		e.Err = m.Err()
	}
	if _, panicked := err.(*message.PanicError); panicked {
		if hs.MessageException != nil {
			hs.MessageException(ctx, e)
		}
	} else if hs.MessageStop != nil {
		hs.MessageStop(ctx, e)
	}
	return out, err
}

// handleFailedHooked calls HandleFailed, then the HandleFailed hook.
func (p *worker[In, Out]) handleFailedHooked(ctx context.Context, failed []*message.Message[In]) {
	h := p.s.hooks
	if h == nil || h.HandleFailed == nil {
		p.handleFailed(ctx, failed)
		return
	}
	start := time.Now()
	p.handleFailed(ctx, failed)
	h.HandleFailed(ctx, telemetry.Failed{Stage: p.s.name, Count: len(failed), Duration: time.Since(start)})
}
