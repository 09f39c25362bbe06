package batching

import (
	"context"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// emitHook calls the BatchEmit hook. Only called with hooks set.
func (s *Batcher[T]) emitHook(ctx context.Context, info message.BatchInfo) {
	if h := s.hooks.BatchEmit; h != nil {
		h(ctx, telemetry.Batch{Stage: s.name, Info: info})
	}
}

// hookNow is one monotonic clock reading (a runtime nanotime, half the
// cost of time.Now), or 0 when the hooks want no durations.
func (bp *batchProcessor[T]) hookNow() time.Duration {
	if bp.s.hooks.NoDurations {
		return 0
	}
	return time.Since(bp.epoch)
}

// batchStart calls the BatchStart hook and returns when the batch started,
// when BatchStop will want it. Only called with hooks set.
func (bp *batchProcessor[T]) batchStart(ctx context.Context, b *message.Batch[T]) time.Duration {
	hs := bp.s.hooks
	if hs.BatchStart != nil {
		hs.BatchStart(ctx, telemetry.Batch{Stage: bp.s.name, BatchProcessor: bp.index, Info: b.Info})
	}
	if hs.BatchStop == nil {
		return 0
	}
	return bp.hookNow()
}

// batchStop calls the BatchStop hook once the batch is acknowledged, with
// its duration from bp.batchT; bp.step tells work that the hook runs,
// should it end the goroutine.
func (bp *batchProcessor[T]) batchStop(ctx context.Context, b *message.Batch[T]) {
	start := bp.batchT
	h := bp.s.hooks.BatchStop
	if h == nil {
		return
	}
	e := telemetry.Batch{Stage: bp.s.name, BatchProcessor: bp.index, Info: b.Info, Failed: bp.batchFailed}
	if !bp.s.hooks.NoDurations {
		e.Duration = bp.hookNow() - start
	}
	bp.step = stepBatchStop
	h(ctx, e)
	bp.step = stepIdle
}

// handleFailedHooked calls HandleFailed, then the HandleFailed hook.
func (bp *batchProcessor[T]) handleFailedHooked(ctx context.Context, info message.BatchInfo) {
	h := bp.s.hooks
	if h == nil || h.HandleFailed == nil {
		bp.handleFailed(ctx, info)
		return
	}
	start := bp.hookNow()
	bp.handleFailed(ctx, info)
	h.HandleFailed(ctx, telemetry.Failed{Stage: bp.s.name, Count: len(bp.failed), Duration: bp.hookNow() - start})
}
