package interrupt

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
)

// A test binary started by exampletest.Start runs drainForever instead
// of the tests.
func TestMain(m *testing.M) {
	exampletest.RunMain(drainForever)
	goleak.VerifyTestMain(m)
}

// drainForever is an example whose drain never ends: it waits for the
// first signal, then for nothing.
func drainForever() {
	ctx, stop := Context(context.Background())
	defer stop()
	fmt.Println("running")
	<-ctx.Done()
	fmt.Println("draining")
	select {}
}

// Guarantee: a second SIGINT or SIGTERM, while an example drains after
// the first, ends the process at once, with one line on stderr saying so
// and the exit status a shell reports for that signal; the first only
// starts the drain.
func TestSecondSignalExitsWithoutWaitingForTheDrain(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			p := exampletest.Start(t)
			p.WaitOutput("running", time.Minute)
			p.Signal(sig)
			p.WaitOutput("draining", time.Minute)
			p.Signal(sig)
			if code := p.Wait(30 * time.Second); code != 128+int(sig) {
				t.Fatalf("exit status %d, want %d\nstderr:\n%s", code, 128+int(sig), p.Stderr())
			}
			lines := strings.Split(strings.TrimSpace(p.Stderr()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "without waiting for the drain") {
				t.Fatalf("stderr %q, want one line saying it does not wait for the drain", p.Stderr())
			}
		})
	}
}

// Guarantee: stop cancels the context and stops listening, leaving no
// goroutine behind, whether or not a signal came.
func TestStopCancelsAndLeavesNoGoroutine(t *testing.T) {
	ctx, stop := Context(context.Background())
	if ctx.Err() != nil {
		t.Fatal("cancelled before any signal")
	}
	stop()
	stop()
	if ctx.Err() == nil {
		t.Fatal("stop did not cancel the context")
	}
	var exited []int
	ctx, stop = notify(context.Background(), os.Stderr, func(c int) { exited = append(exited, c) })
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "interrupt") {
		t.Errorf("cause %v, want one naming the signal", cause)
	}
	stop()
	if len(exited) != 0 {
		t.Fatalf("exited %v after a single signal", exited)
	}
}

// Guarantee: the context ends with its parent's.
func TestTheParentsEndEndsTheContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := Context(parent)
	defer stop()
	cancel()
	if ctx.Err() == nil {
		t.Fatal("the context lives on after its parent ended")
	}
}

// Guarantee: the exit status is the second signal's, whichever the first
// was: SIGTERM after Ctrl-C exits with 143.
func TestTheExitStatusIsTheSecondSignals(t *testing.T) {
	exited := make(chan int, 1)
	ctx, stop := notify(context.Background(), io.Discard, func(c int) { exited <- c })
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit status %d, want %d", code, 128+int(syscall.SIGTERM))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second signal did not end the process")
	}
}
