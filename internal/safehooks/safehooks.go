// Package safehooks wraps a set of telemetry hooks so that a hook that
// panics costs one log line and its own call, never the process nor the
// message, batch or pipeline it observed. The stages, the pipeline and the
// Kafka source call the hooks through it.
package safehooks

import (
	"context"
	"log/slog"
	"slices"

	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Panicked is the message a recovered hook panic is logged with; its
// "hook" attribute names the hook.
const Panicked = "telemetry hook panicked; the work it observed goes on"

// Exited is the message a hook's exit (runtime.Goexit, as t.FailNow
// does) is logged with, where the caller recovers from it (the Kafka
// sources' partition hooks); its "hook" attribute names the hook and its
// "stack" attribute holds the stack of the exit.
const Exited = "telemetry hook ended its goroutine (runtime.Goexit); the work it observed goes on"

// Wrap returns a copy of h whose every hook recovers its own panic and
// logs it to log (which names the stage) with Panicked, the hook's name,
// the panic value and the stack. Nil hooks stay nil, so what the stages
// decide from which hooks are set is unchanged; a nil h returns nil. A
// wrapped hook allocates nothing per call.
func Wrap(h *telemetry.Hooks, log *slog.Logger) *telemetry.Hooks {
	if h == nil {
		return nil
	}
	g := *h
	g.PipelineStart = guard(h.PipelineStart, log, "PipelineStart")
	g.PipelineStop = guard(h.PipelineStop, log, "PipelineStop")
	g.ChunkStart = guard(h.ChunkStart, log, "ChunkStart")
	g.ChunkStop = guard(h.ChunkStop, log, "ChunkStop")
	g.MessageStart = guard(h.MessageStart, log, "MessageStart")
	g.MessageStop = guard(h.MessageStop, log, "MessageStop")
	g.MessageException = guard(h.MessageException, log, "MessageException")
	g.HandleFailed = guard(h.HandleFailed, log, "HandleFailed")
	g.BatchEmit = guard(h.BatchEmit, log, "BatchEmit")
	g.BatchStart = guard(h.BatchStart, log, "BatchStart")
	g.BatchStop = guard(h.BatchStop, log, "BatchStop")
	g.PartitionAssigned = guard(h.PartitionAssigned, log, "PartitionAssigned")
	g.PartitionRevoked = guard(h.PartitionRevoked, log, "PartitionRevoked")
	return &g
}

func guard[E any](f func(ctx context.Context, e E), log *slog.Logger, hook string) func(context.Context, E) {
	return panics.Guard(f, log, Panicked, slog.String("hook", hook))
}

// CallAside calls f(ctx, e), the hook named hook, on a goroutine of its own
// and waits for it to end. A panic in f is recovered and logged to log
// with Panicked; an exit (runtime.Goexit, as t.FailNow does) ends only
// that goroutine and is logged with Exited and the stack of the exit. One
// error line each, with attrs, and the caller's goroutine goes on as if f
// had returned: the caller may be a client library's goroutine (a Kafka
// consumer group's session or group manager) that an exit must not end.
// It costs a goroutine per call, so it is for hooks called once per event
// (a partition assigned or revoked), never per message.
func CallAside[E any](ctx context.Context, log *slog.Logger, hook string, f func(context.Context, E), e E, attrs ...any) {
	panics.Aside(ctx, log, Panicked, Exited, func() { f(ctx, e) }, append(slices.Clip(attrs), slog.String("hook", hook))...)
}
