// Package hookcall calls a subscriber's code that a topic backend calls on
// its client's goroutines (topic.SubscriberOptions.OnRelease and Reach):
// a panic or an exit (runtime.Goexit) of that code costs a log line,
// never the process nor the client's goroutine.
package hookcall

import (
	"context"
	"log/slog"
	"slices"

	"github.com/boulevard-go/boulevard/internal/panics"
)

// The messages an OnRelease (or the done it returned) that panicked or
// ended its goroutine is logged with (see Release).
const (
	ReleasePanicked = "the subscriber's OnRelease panicked; the partition is let go as if it had returned"
	ReleaseExited   = "the subscriber's OnRelease ended its goroutine (runtime.Goexit); the partition is let go as if it had returned"
)

// Release calls f, a subscription's OnRelease, and returns the done it
// returned (nil: none), to be called once the wait is over. Both run as
// panics.Aside runs them: a panic or an exit (runtime.Goexit, as
// t.FailNow does) costs one error line on log, with ReleasePanicked or
// ReleaseExited, attrs, the "hook" attribute ("OnRelease" or "OnRelease
// done") and the stack, and the revoke goes on as if it had returned (f
// then with no done). It costs a goroutine per call, once per partition
// let go while the subscriber holds messages of it.
func Release(log *slog.Logger, f func() (done func()), attrs ...any) (done func()) {
	var d func()
	call(log, ReleasePanicked, ReleaseExited, "OnRelease", func() { d = f() }, attrs)
	if d == nil {
		return nil
	}
	return func() { call(log, ReleasePanicked, ReleaseExited, "OnRelease done", d, attrs) }
}

// The messages a Reach observer's call that panicked or ended its
// goroutine is logged with (see Reach).
const (
	ReachPanicked = "the subscriber's Reach observer panicked; the subscription goes on"
	ReachExited   = "the subscriber's Reach observer ended its goroutine (runtime.Goexit); the subscription goes on"
)

// Observer is a topic.ReachObserver.
type Observer interface {
	Degrade(err error)
	Recovered()
}

// Reach returns o, a subscription's Reach observer, with each call run as
// panics.Aside runs it: a panic or an exit (runtime.Goexit) costs one
// error line on log, with ReachPanicked or ReachExited, attrs, the "hook"
// attribute ("Degrade" or "Recovered") and the stack, and the backend's
// goroutine goes on. A nil o returns nil. It costs a goroutine per call:
// the backends call it at changes of reach, never per message.
func Reach(o Observer, log *slog.Logger, attrs ...any) Observer {
	if o == nil {
		return nil
	}
	return reach{o: o, log: log, attrs: slices.Clip(attrs)}
}

type reach struct {
	o     Observer
	log   *slog.Logger
	attrs []any
}

func (r reach) Degrade(err error) {
	call(r.log, ReachPanicked, ReachExited, "Degrade", func() { r.o.Degrade(err) }, r.attrs)
}

func (r reach) Recovered() {
	call(r.log, ReachPanicked, ReachExited, "Recovered", r.o.Recovered, r.attrs)
}

func call(log *slog.Logger, panicked, exited, hook string, f func(), attrs []any) {
	panics.Aside(context.Background(), log, panicked, exited, f, append(slices.Clip(attrs), slog.String("hook", hook))...)
}
