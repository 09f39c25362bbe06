// Package interrupt gives every example the same stop signals: SIGINT
// (Ctrl-C) and SIGTERM (kill, docker stop, systemd, Kubernetes) both stop
// an example the graceful way, with its drain and its report.
package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signals are the signals that stop an example gracefully.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// Context returns a copy of parent that is cancelled when the process
// receives one of Signals, and the function that stops listening for them
// (signal.NotifyContext's).
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, Signals...)
}
