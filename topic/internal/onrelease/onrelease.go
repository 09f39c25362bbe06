// Package onrelease calls a subscriber's topic.SubscriberOptions.OnRelease
// for the Kafka backends, which let go of a partition on their client's
// goroutine: a panic or an exit (runtime.Goexit) of the subscriber's code
// costs a log line, never the process nor the client's goroutine.
package onrelease

import (
	"context"
	"log/slog"
	"slices"

	"github.com/boulevard-go/boulevard/internal/panics"
)

// The messages an OnRelease (or the done it returned) that panicked or
// ended its goroutine is logged with (see Call).
const (
	Panicked = "the subscriber's OnRelease panicked; the partition is let go as if it had returned"
	Exited   = "the subscriber's OnRelease ended its goroutine (runtime.Goexit); the partition is let go as if it had returned"
)

// Call calls f, a subscription's OnRelease, and returns the done it
// returned (nil: none), to be called once the wait is over. Both run as
// panics.Aside runs them: a panic or an exit (runtime.Goexit, as
// t.FailNow does) costs one error line on log, with Panicked or Exited,
// attrs, the "hook" attribute ("OnRelease" or "OnRelease done") and the
// stack, and the revoke goes on as if it had returned (f then with no
// done). It costs a goroutine per call, once per partition let go while
// the subscriber holds messages of it.
func Call(log *slog.Logger, f func() (done func()), attrs ...any) (done func()) {
	var d func()
	call(log, "OnRelease", func() { d = f() }, attrs)
	if d == nil {
		return nil
	}
	return func() { call(log, "OnRelease done", d, attrs) }
}

func call(log *slog.Logger, hook string, f func(), attrs []any) {
	panics.Aside(context.Background(), log, Panicked, Exited, f, append(slices.Clip(attrs), slog.String("hook", hook))...)
}
