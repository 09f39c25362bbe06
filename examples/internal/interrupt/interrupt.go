// Package interrupt gives every example the same stop signals: SIGINT
// (Ctrl-C) and SIGTERM (kill, docker stop, systemd, Kubernetes) both stop
// an example the graceful way, with its drain and its report; a second
// one stops it at once.
package interrupt

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Signals are the signals that stop an example gracefully.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// Context returns a copy of parent that is cancelled when the process
// receives one of Signals, and the function that stops listening for them
// and cancels it (as signal.NotifyContext's does).
//
// The first signal only cancels the context: the example drains and
// reports, which may take as long as its drain's bound. A second signal,
// while it does (Ctrl-C pressed again), ends the process at once, without
// waiting for the drain: it prints one line saying so to stderr and exits
// with status 128 plus the signal's number (130 for SIGINT, 143 for
// SIGTERM), what a shell reports for a process the signal killed. What the
// drain had not acknowledged by then is redelivered by the broker.
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	return notify(parent, os.Stderr, os.Exit)
}

// notify is Context with the second signal's line written to stderr and
// the process ended by exit.
func notify(parent context.Context, stderr io.Writer, exit func(int)) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, Signals...)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var first os.Signal
		select {
		case first = <-ch:
		case <-done:
			return
		}
		cancel(fmt.Errorf("%v signal received", first))
		select {
		case again := <-ch:
			fmt.Fprintf(stderr, "%v received again: exiting now, without waiting for the drain to end\n", again)
			exit(exitStatus(again))
		case <-done:
		}
	})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			wg.Wait()
			cancel(context.Canceled)
		})
	}
	return ctx, stop
}

// exitStatus is 128 plus sig's number, as a shell reports a process
// killed by sig.
func exitStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
