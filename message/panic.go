package message

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// PanicError is the error a message (or a whole batch) fails with when the
// user code handling it panicked. It keeps the panic value and the stack of
// the panicking goroutine.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the point of recovery.
	Stack []byte
}

// Error describes the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is sees
// through a panic(err).
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// Recover turns a panic into a *PanicError in *err when deferred by a
// function that calls user code (defer message.Recover(&err)), keeping the
// panic value and the stack of the panicking goroutine; the function then
// returns normally. Without a panic it leaves *err alone.
func Recover(err *error) {
	if r := recover(); r != nil {
		*err = &PanicError{Value: r, Stack: debug.Stack()}
	}
}

// GuardKey wraps a user's key function (a PartitionBy) so that a panic in it
// does not crash the process: the message fails with a *PanicError, gets the
// empty key, and onPanic (which may be nil) is told.
func GuardKey[T any](key func(*Message[T]) string, onPanic func(*Message[T], *PanicError)) func(*Message[T]) string {
	return func(m *Message[T]) (k string) {
		if m == nil {
			// Only a misbehaving source delivers one; the processors
			// drop it. Neither key nor m.Fail can be called on it.
			return ""
		}
		var err error
		defer func() {
			if pe, ok := err.(*PanicError); ok {
				m.Fail(pe)
				if onPanic != nil {
					onPanic(m, pe)
				}
				k = ""
			}
		}()
		defer Recover(&err)
		return key(m)
	}
}

// ErrHandlerExited is the error the messages a stage's goroutine held fail
// with when user code it called (a handler, Prepare, HandleFailed, a
// telemetry hook) ended that goroutine with runtime.Goexit, as t.FailNow
// does: the stage reports their outcome and another goroutine takes over.
var ErrHandlerExited = errors.New("message: user code ended its goroutine (runtime.Goexit) before returning")
