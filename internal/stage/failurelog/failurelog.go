// Package failurelog holds the failure lines of the stage runtime: the
// kinds of failure a processor or batcher stage logs, each kept to one
// line per interval by a logburst.Kind, so that a downstream outage that
// fails every message costs a few lines rather than one per message.
// Only the stage packages use it.
package failurelog

import (
	"context"
	"log/slog"
	"time"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/message"
)

// InterruptedLog and BatchInterruptedLog are the messages of the lines
// logged instead of a failure line when the shutdown cut a handler or
// Prepare (InterruptedLog), or a batch handler (BatchInterruptedLog),
// short.
const (
	InterruptedLog      = "processing interrupted by the shutdown; message left for the source to deliver again"
	BatchInterruptedLog = "batch handler interrupted by the shutdown; its messages not failed otherwise are left for the source to deliver again"
)

// Lines are the failure lines of one stage, each kind with its own
// limiter; a stage logs the kinds it has, and its goroutines share them.
type Lines struct {
	// Failed: a message failed (the handler returned an error, or the
	// message was routed to no batcher). WARN.
	Failed logburst.Kind
	// Panicked: the handler panicked on a message. ERROR, with the stack.
	Panicked logburst.Kind
	// Prepare: Prepare failed a whole chunk. WARN.
	Prepare logburst.Kind
	// PartitionBy: a stage's PartitionBy panicked on a message. ERROR,
	// with the stack.
	PartitionBy logburst.Kind
	// Weight: a batcher's Weight panicked on a message. ERROR, with the
	// stack.
	Weight logburst.Kind
	// BatchFailed: a batch handler failed its batch. WARN.
	BatchFailed logburst.Kind
	// BatchPanicked: a batch handler panicked. ERROR, with the stack.
	BatchPanicked logburst.Kind
	// Interrupted: the pipeline's shutdown cut a handler or Prepare
	// short, and the message failed with its cancelled context
	// (acker.CausedByShutdown): not handled, left for the source to
	// deliver again. INFO: the drain's cut is the event, already logged.
	Interrupted logburst.Kind
	// BatchInterrupted: the pipeline's shutdown cut a batch handler
	// short, as Interrupted. INFO.
	BatchInterrupted logburst.Kind
}

// New returns the failure lines of a stage, each holding like lines back
// for every after one is logged: zero means logburst.Interval, a negative
// value logs every failure.
func New(every time.Duration) *Lines {
	return &Lines{
		Failed:           logburst.NewKind(every, slog.LevelWarn, "message failed"),
		Panicked:         logburst.NewKind(every, slog.LevelError, "handler panicked; message failed"),
		Prepare:          logburst.NewKind(every, slog.LevelWarn, "prepare failed; failing the whole chunk"),
		PartitionBy:      logburst.NewKind(every, slog.LevelError, "PartitionBy panicked; message failed"),
		Weight:           logburst.NewKind(every, slog.LevelError, "Weight panicked; message failed"),
		BatchFailed:      logburst.NewKind(every, slog.LevelWarn, "batch handler failed the batch"),
		BatchPanicked:    logburst.NewKind(every, slog.LevelError, "batch handler panicked; failing the whole batch"),
		Interrupted:      logburst.NewKind(every, slog.LevelInfo, InterruptedLog),
		BatchInterrupted: logburst.NewKind(every, slog.LevelInfo, BatchInterruptedLog),
	}
}

// Flush logs on log, one line per kind, the failures held back since the
// last line of their kind (see logburst.Kind.FlushHeld). The stage calls it
// once its goroutines have returned, so that no count is left unsaid.
func (l *Lines) Flush(ctx context.Context, log *slog.Logger) {
	for _, k := range []*logburst.Kind{&l.Failed, &l.Panicked, &l.Prepare, &l.PartitionBy, &l.Weight, &l.BatchFailed, &l.BatchPanicked, &l.Interrupted, &l.BatchInterrupted} {
		k.FlushHeld(ctx, log)
	}
}

// Failed is how a failure line logs the message m that failed: as m logs
// itself (message.Message.LogValue) without its error, which the line
// carries on its own (as error, or as panic with the stack), so that the
// line says it once.
func Failed[T any](m *message.Message[T]) slog.LogValuer { return failedMessage[T]{m} }

type failedMessage[T any] struct{ m *message.Message[T] }

func (f failedMessage[T]) LogValue() slog.Value {
	v := f.m.LogValue()
	attrs := v.Group()
	kept := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if a.Key != "error" {
			kept = append(kept, a)
		}
	}
	return slog.GroupValue(kept...)
}
