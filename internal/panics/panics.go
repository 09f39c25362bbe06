// Package panics logs a panic of user code that has no message to fail, such
// as a failure hook or a source's grant callback, so that it costs one log
// line instead of the process.
package panics

import (
	"context"
	"log/slog"
	"runtime/debug"
)

// Log recovers a panic when deferred by a function that calls user code
// (defer panics.Log(ctx, log, "HandleFailed panicked")), and logs msg once
// at error level with attrs, the panic value and the stack; the function
// then returns normally.
func Log(ctx context.Context, log *slog.Logger, msg string, attrs ...any) {
	if r := recover(); r != nil {
		log.ErrorContext(ctx, msg, append(attrs, slog.Any("panic", r), slog.String("stack", string(debug.Stack())))...)
	}
}
