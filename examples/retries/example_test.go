package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
)

// A test binary started by exampletest.Start runs main instead.
func TestMain(m *testing.M) {
	exampletest.RunMain(main)
	goleak.VerifyTestMain(m)
}

// Guarantee: Ctrl-C and SIGTERM both stop the program before it is done
// (its hold queues keep orders for seconds): it exits 1 with an error
// saying what it was waiting for and how far that had got.
func TestSignalsStopAndSayWhatWasLeft(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			p := exampletest.Start(t)
			p.WaitOutput("queues: ", time.Minute)
			p.Signal(sig)
			if code := p.Wait(time.Minute); code != 1 {
				t.Fatalf("exit status %d, want 1\nstdout:\n%s", code, p.Stdout())
			}
			if want := "waiting for the orders and the ledger to settle (orders: "; !strings.Contains(p.Stderr(), want) {
				t.Fatalf("stderr lacks %q:\n%s", want, p.Stderr())
			}
		})
	}
}

// The example retries orders through both hold queues, dead-letters the
// malformed one and, on the sequenced ledger, every later entry of the
// account whose entry was rejected; it reads the ledger's DLQ through a
// pipeline, replays the dead order and stops everything cleanly.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, slog.New(slog.DiscardHandler), nil); err != nil {
		panic(err)
	}
	// Output:
	// queues: order-settlement, order-settlement-hold-1s, order-settlement-hold-2s, order-settlement-dlq, ledger, ledger-dlq
	// order 1: settled after 0 retries
	// order 2: settled after 0 retries
	// order 3: gateway down (retry 1 → order-settlement-hold-1s); gateway down (retry 2 → order-settlement-hold-2s); settled after 2 retries
	// order 4: settled after 0 retries
	// order 5: rejected
	// order 6: gateway down (retry 1 → order-settlement-hold-1s); gateway down (retry 2 → order-settlement-hold-2s); settled after 2 retries
	// order 7: settled after 0 retries
	// account A: #1 posted, #2 rejected
	// account B: #1 posted, #2 posted, #3 posted
	// ledger-dlq holds:
	//   A #2: poisoned (overdraft)
	//   A #3: poisoned (key "A" poisoned by an earlier message: overdraft)
	//   A #4: poisoned (key "A" poisoned by an earlier message: overdraft)
	// order-settlement-dlq holds order 5: rejected (malformed order: negative amount) after 0 retries
	// replayed 1, kept 0; order 5: rejected; settled after 0 retries
}
