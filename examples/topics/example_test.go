package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example wires its four pipelines, propagates fraud's rejections back
// to ingest's source through two topic hops, and stops everything cleanly.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, slog.New(slog.DiscardHandler), 12); err != nil {
		panic(err)
	}
	// Output:
	// topics:
	//   audit   broadcast_only  ack_mode=all   propagation=auto  publishers=enrich  subscribers=broadcast archive, broadcast fraud
	//   orders  balanced_only   ack_mode=first propagation=auto  publishers=ingest  subscribers=group enrichers
	//
	// ingest's source saw 12 outcomes:
	//   order  1 acked
	//   order  2 acked
	//   order  3 acked
	//   order  4 acked
	//   order  5 acked
	//   order  6 acked
	//   order  7 acked
	//   order  8 acked
	//   order  9 acked
	//   order 10 failed: topic orders: downstream nacked: topic audit: downstream nacked: order 10: suspicious amount
	//   order 11 failed: topic orders: downstream nacked: topic audit: downstream nacked: order 11: suspicious amount
	//   order 12 failed: topic orders: downstream nacked: topic audit: downstream nacked: order 12: suspicious amount
	//
	// archive handled 12 orders
	// enrich: received 12 from orders (acked 9, nacked 3); published 12 into audit (acked 9, failed 3)
	// topic orders: published 12, dropped 0, lagged 0, in flight 0
	// topic audit: published 12, dropped 0, lagged 0, in flight 0
}

// A negative -orders, or one past the bound (the report prints a line
// per order), is refused with an error naming the flag, before anything
// starts.
func TestOrdersOutOfRangeRefused(t *testing.T) {
	for _, n := range []int{-1, maxOrders + 1} {
		err := run(t.Context(), io.Discard, slog.New(slog.DiscardHandler), n)
		if err == nil || !strings.Contains(err.Error(), "-orders must be 0 to") {
			t.Errorf("run with -orders %d = %v, want an error naming -orders", n, err)
		}
	}
}

// Guarantee: a run stopped before every outcome is in (Ctrl-C, SIGTERM)
// says how many of the orders' outcomes were in.
func TestInterruptedWaitSaysHowManyOutcomesWereIn(t *testing.T) {
	l := newLedger()
	l.Ack(t.Context(), []acker.Outcome{{ID: 1}, {ID: 2}}, []acker.Outcome{{ID: 3, Err: errors.New("rejected")}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := l.wait(ctx, 12)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "(3 of 12 in)") {
		t.Fatalf("interrupted wait = %v, want context.Canceled saying 3 of the 12 outcomes were in", err)
	}
}
