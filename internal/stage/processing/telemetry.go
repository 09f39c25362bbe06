package processing

import (
	"context"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// hookClock is a processor's monotonic clock for the telemetry hooks: one
// reading is one runtime nanotime (time.Since of a time carrying a
// monotonic reading), half the cost of time.Now, which also reads the
// wall clock.
type hookClock struct {
	epoch  time.Time
	mark   time.Duration // the latest reading: a message's start
	chunks uint32        // chunks taken, for the sampling
	timed  bool          // the current chunk is timed
}

func (c *hookClock) now() time.Duration { return time.Since(c.epoch) }

// hookPlan is what a pool's hooks need, decided once when the pool is
// built so that the loops test a bool rather than several fields.
type hookPlan struct {
	// messages: a message hook is set, so the handler is called through
	// handleHooked.
	messages bool
	// chunkClock: read the clock when a timed chunk starts (ChunkStop or
	// the message hooks want durations).
	chunkClock bool
	// every: time one chunk in every (Hooks.DurationSampling).
	every uint32
}

func planHooks(h *telemetry.Hooks) hookPlan {
	if h == nil {
		return hookPlan{}
	}
	msgs := h.MessageStart != nil || h.MessageStop != nil || h.MessageException != nil
	every := uint32(telemetry.DefaultDurationSampling)
	if h.DurationSampling > 0 {
		every = uint32(h.DurationSampling)
	}
	return hookPlan{
		messages:   msgs,
		chunkClock: !h.NoDurations && (h.ChunkStop != nil || h.MessageStop != nil || h.MessageException != nil),
		every:      every,
	}
}

// chunkStart calls the ChunkStart hook and, on a timed chunk (one in
// plan.every) when a duration will be wanted, reads the clock. Only called
// with hooks set.
func (p *worker[In, Out]) chunkStart(ctx context.Context, n int) time.Duration {
	if h := p.s.hooks.ChunkStart; h != nil {
		h(ctx, telemetry.Chunk{Stage: p.s.name, Processor: p.index, Size: n})
	}
	if !p.s.plan.chunkClock {
		return 0
	}
	c := &p.clock
	c.timed = c.chunks%p.s.plan.every == 0
	c.chunks++
	if !c.timed {
		return 0
	}
	c.mark = c.now()
	return c.mark
}

// chunkStop calls the ChunkStop hook with the chunk's duration, from
// p.chunkT; p.step tells work that the hook runs, should it end the
// goroutine.
func (p *worker[In, Out]) chunkStop(ctx context.Context, n int) {
	start := p.chunkT
	h := p.s.hooks.ChunkStop
	if h == nil {
		return
	}
	e := telemetry.Chunk{Stage: p.s.name, Processor: p.index, Size: n}
	if p.clock.timed {
		e.Duration, e.Timed = p.clock.now()-start, true
	}
	p.step = stepChunkStop
	h(ctx, e)
	p.step = stepIdle
}

// preparedMark restarts the message clock once Prepare has run, so that
// the first message's duration does not include it.
func (p *worker[In, Out]) preparedMark() {
	if p.s.plan.messages && p.clock.timed {
		p.clock.mark = p.clock.now()
	}
}

// messageHooks are a processor's message hooks and the part of their event
// that never changes, copied out of the pool's Hooks when the processor is
// made so that each message reads them from the processor itself.
type messageHooks struct {
	start, stop, exception func(context.Context, telemetry.Message)
	event                  telemetry.Message
}

func newMessageHooks(h *telemetry.Hooks, stage string, processor int) messageHooks {
	if h == nil {
		return messageHooks{}
	}
	return messageHooks{start: h.MessageStart, stop: h.MessageStop, exception: h.MessageException,
		event: telemetry.Message{Stage: stage, Processor: processor}}
}

// handleHooked calls the handler between the message hooks. In a timed
// chunk it reads the clock once: a message's start is the previous
// message's stop in the same chunk (or the chunk's start, after Prepare).
func (p *worker[In, Out]) handleHooked(ctx context.Context, m *message.Message[In]) (out Out, err error) {
	mh := &p.mh
	e := mh.event
	if mh.start != nil {
		mh.start(ctx, e)
	}
	if p.st.sample {
		out, err = p.handleTimed(ctx, m)
	} else {
		out, err = p.handle(ctx, m)
	}
	if p.clock.timed {
		now := p.clock.now()
		e.Duration, e.Timed = now-p.clock.mark, true
		p.clock.mark = now
	}
	stop := mh.stop
	if err != nil {
		if pe, panicked := err.(*message.PanicError); panicked && pe != nil {
			stop = mh.exception
		}
	}
	if stop == nil {
		return out, err
	}
	e.Err = err
	if err == nil && m.Failed() {
		e.Err = m.Err()
	}
	stop(ctx, e)
	return out, err
}

// handleFailedHooked calls HandleFailed, then the HandleFailed hook.
func (p *worker[In, Out]) handleFailedHooked(ctx context.Context, failed []*message.Message[In]) {
	h := p.s.hooks
	if h == nil || h.HandleFailed == nil {
		p.handleFailed(ctx, failed)
		return
	}
	e := telemetry.Failed{Stage: p.s.name, Count: len(failed)}
	if h.NoDurations {
		p.handleFailed(ctx, failed)
	} else {
		start := p.clock.now()
		p.handleFailed(ctx, failed)
		e.Duration = p.clock.now() - start
	}
	h.HandleFailed(ctx, e)
}
