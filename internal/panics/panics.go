// Package panics logs a panic of user code that has no message to fail, such
// as a failure hook, a telemetry hook or a source's grant callback, so that
// it costs one log line instead of the process.
package panics

import (
	"context"
	"log/slog"
	"runtime/debug"
	"slices"
)

// Log recovers a panic when deferred by a function that calls user code
// (defer panics.Log(ctx, log, "HandleFailed panicked")), and logs msg once
// at error level with attrs, the panic value and the stack; the function
// then returns normally.
func Log(ctx context.Context, log *slog.Logger, msg string, attrs ...any) {
	if r := recover(); r != nil {
		log.ErrorContext(ctx, msg, append(slices.Clip(attrs), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))...)
	}
}

// Guard returns f wrapped so that a panic in it is recovered and logged by
// Log with msg and attrs, and the call returns normally; nil when f is nil.
// The wrapper allocates nothing per call.
func Guard[E any](f func(context.Context, E), log *slog.Logger, msg string, attrs ...any) func(context.Context, E) {
	if f == nil {
		return nil
	}
	g := &guard{log: log, msg: msg, attrs: slices.Clip(attrs)}
	return func(ctx context.Context, e E) {
		defer g.recover(ctx)
		f(ctx, e)
	}
}

// guard is what a Guard wrapper logs a panic with.
type guard struct {
	log   *slog.Logger
	msg   string
	attrs []any
}

// recover is Log with the guard's arguments, deferred by a Guard wrapper.
func (g *guard) recover(ctx context.Context) {
	if r := recover(); r != nil {
		g.log.ErrorContext(ctx, g.msg, append(g.attrs, slog.Any("panic", r), slog.String("stack", string(debug.Stack())))...)
	}
}

// Isolate calls f on a goroutine of its own, waits for it and returns its
// error, or, when f ended that goroutine (runtime.Goexit, as t.FailNow
// does) before returning, exited(stack of the exit): the exit ends only
// that goroutine, never the caller's. f recovers its own panics (a panic
// that leaves f goes on, as it would without Isolate). It costs a
// goroutine per call, so it is for user code called once per event (a
// source's Run or Close, a drainer's Drain), never per message.
func Isolate(f func() error, exited func(stack []byte) error) error {
	res := make(chan error, 1)
	go func() {
		var err error
		returned := false
		defer func() {
			if !returned {
				err = exited(debug.Stack())
			}
			res <- err
		}()
		err = f()
		returned = true
	}()
	return <-res
}

// Aside calls f on a goroutine of its own and waits for it to end. A
// panic in f is recovered and logged to log with panicked, attrs, the
// panic value and the stack; an exit (runtime.Goexit, as t.FailNow does)
// ends only that goroutine and is logged with exited, attrs and the stack
// of the exit. One error line each, and the caller's goroutine goes on as
// if f had returned: the caller may be a client library's goroutine (a
// Kafka consumer group's session) that an exit must not end. It reports
// whether f returned. It costs a goroutine per call, so it is for user
// code called once per event (a partition assigned or revoked), never per
// message.
func Aside(ctx context.Context, log *slog.Logger, panicked, exited string, f func(), attrs ...any) (returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if returned {
				return
			}
			if r := recover(); r != nil {
				log.ErrorContext(ctx, panicked, append(slices.Clip(attrs), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))...)
				return
			}
			log.ErrorContext(ctx, exited, append(slices.Clip(attrs), slog.String("stack", string(debug.Stack())))...)
		}()
		f()
		returned = true
	}()
	<-done
	return returned
}
