package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/examples/internal/exampletest"
)

// Every test must leave no goroutine of the pipeline behind. A test binary
// started by exampletest.Start runs main instead.
func TestMain(m *testing.M) {
	exampletest.RunMain(main)
	goleak.VerifyTestMain(m)
}

// Every generated order is acknowledged exactly once; every malformed order
// fails with the reason it was generated with; every valid one is billed.
func TestTotalsAddUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	res, err := runPipeline(ctx, config{n: 3000, customers: 4, seed: 7, sample: 1}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.generated != 3000 {
		t.Errorf("generated %d orders, want 3000", res.generated)
	}
	malformed := res.generated - res.byKind[kindValid]
	if malformed == 0 {
		t.Fatal("the source generated no malformed order; the test proves nothing")
	}
	if got := res.ok + res.totalFailed(); got != res.generated {
		t.Errorf("ok %d + failed %d = %d, want %d generated", res.ok, res.totalFailed(), got, res.generated)
	}
	if got := res.totalFailed(); got != malformed {
		t.Errorf("%d orders failed, want the %d malformed ones", got, malformed)
	}
	if res.discarded != res.totalFailed() {
		t.Errorf("%d of %d failed orders had disposition discard, want all", res.discarded, res.totalFailed())
	}
	if err := res.check(); err != nil {
		t.Error(err)
	}
	if len(res.customers) != 4 {
		t.Errorf("%d customers billed, want 4", len(res.customers))
	}
}

// run prints the batch samples, the topology and the totals, and succeeds.
func TestRunPrintsReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, config{n: 500, customers: 3, seed: 1, sample: 2}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"batch acme ",
		"pipeline quickstart\n",
		"batcher billing: size 50, timeout 200ms",
		"orders generated",
		"acknowledged ok",
		"messages/s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Cancelling the context stops the source early, and the drain still
// acknowledges every order the source had generated.
func TestCancelDrains(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	const n = 50_000_000 // far more than can be generated in 100ms
	res, err := runPipeline(ctx, config{n: n, customers: 5, seed: 3}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if res.generated == 0 || res.generated >= n {
		t.Fatalf("generated %d orders, want some but fewer than %d", res.generated, n)
	}
	if err := res.check(); err != nil {
		t.Error(err)
	}
}

// An empty run and bad flags behave.
func TestEdgeCases(t *testing.T) {
	ctx := context.Background()
	res, err := runPipeline(ctx, config{n: 0, customers: 1}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if res.generated != 0 || res.ok != 0 || res.totalFailed() != 0 {
		t.Errorf("n=0: generated %d, ok %d, failed %d; want all 0", res.generated, res.ok, res.totalFailed())
	}
	if _, err := runPipeline(ctx, config{n: -1, customers: 1}, new(bytes.Buffer)); err == nil {
		t.Error("n=-1 was accepted")
	}
	if _, err := runPipeline(ctx, config{n: 10, customers: 0}, new(bytes.Buffer)); err == nil {
		t.Error("customers=0 was accepted")
	}
	// Too many customers is an error naming the flag, not a crash or a
	// slice of names sized by the flag.
	for _, customers := range []int{maxCustomers + 1, math.MaxInt} {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			_, err = runPipeline(ctx, config{n: 10, customers: customers}, new(bytes.Buffer))
			return err
		}()
		if err == nil || !strings.Contains(err.Error(), "-customers") || strings.HasPrefix(err.Error(), "panic") {
			t.Errorf("customers=%d: runPipeline = %v, want an error naming -customers", customers, err)
		}
	}
}

// Guarantee: Ctrl-C and SIGTERM both stop the program the graceful way:
// the pipeline drains, the report is printed and says the run was
// interrupted, and the program exits 0.
func TestSignalsDrainAndReport(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			p := exampletest.Start(t, "-n", "1000000000")
			p.WaitOutput("  batch ", time.Minute) // the pipeline is running
			p.Signal(sig)
			if code := p.Wait(time.Minute); code != 0 {
				t.Fatalf("exit status %d, want 0\nstderr:\n%s", code, p.Stderr())
			}
			if !strings.Contains(p.Stdout(), "\ninterrupted: ") || !strings.Contains(p.Stdout(), "orders generated") {
				t.Fatalf("no report of the interrupted run:\n%s", p.Stdout())
			}
		})
	}
}
