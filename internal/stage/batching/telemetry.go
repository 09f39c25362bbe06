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

// batchStart calls the BatchStart hook and returns when the batch started.
// Only called with hooks set.
func (bp *batchProcessor[T]) batchStart(ctx context.Context, b *message.Batch[T]) time.Time {
	if h := bp.s.hooks.BatchStart; h != nil {
		h(ctx, telemetry.Batch{Stage: bp.s.name, BatchProcessor: bp.index, Info: b.Info})
	}
	return time.Now()
}

// batchStop calls the BatchStop hook once the batch is acknowledged.
func (bp *batchProcessor[T]) batchStop(ctx context.Context, b *message.Batch[T], start time.Time) {
	h := bp.s.hooks.BatchStop
	if h == nil {
		return
	}
	e := telemetry.Batch{Stage: bp.s.name, BatchProcessor: bp.index, Info: b.Info, Duration: time.Since(start)}
	for _, m := range b.Messages {
		if m.Failed() {
			e.Failed++
		}
	}
	h(ctx, e)
}

// handleFailedHooked calls HandleFailed, then the HandleFailed hook.
func (bp *batchProcessor[T]) handleFailedHooked(ctx context.Context, info message.BatchInfo) {
	h := bp.s.hooks
	if h == nil || h.HandleFailed == nil {
		bp.handleFailed(ctx, info)
		return
	}
	start := time.Now()
	bp.handleFailed(ctx, info)
	h.HandleFailed(ctx, telemetry.Failed{Stage: bp.s.name, Count: len(bp.failed), Duration: time.Since(start)})
}
