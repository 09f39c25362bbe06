package message_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a panic under a deferred Recover becomes a *PanicError in the
// error it points at, with the value, the stack and errors.Is through a
// panicked error; without a panic the error is left as the function set it.
func TestRecoverTurnsPanicIntoPanicError(t *testing.T) {
	cause := errors.New("cause")
	call := func(f func() error) (err error) {
		defer message.Recover(&err)
		return f()
	}
	err := call(func() error { panic(cause) })
	var pe *message.PanicError
	if !errors.As(err, &pe) || pe.Value != cause || !strings.Contains(string(pe.Stack), "goroutine") {
		t.Fatalf("err = %#v, want a *PanicError with the value and a stack", err)
	}
	if !errors.Is(err, cause) {
		t.Fatalf("errors.Is(%v, cause) = false", err)
	}
	plain := errors.New("plain")
	if err := call(func() error { return plain }); err != plain {
		t.Fatalf("err = %v, want the function's own error", err)
	}
	if err := call(func() error { return nil }); err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
}
