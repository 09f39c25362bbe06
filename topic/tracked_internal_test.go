package topic

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// A timeout (or close) that found a ticket on the deadline list before it
// was settled and recycled does not settle the publish that reuses it: the
// generation it read is stale.
func TestStaleTimeoutIgnoresRecycledTicket(t *testing.T) {
	var inFlight atomic.Int64
	c := newTrackerCore(false, true, 4, time.Hour, &inFlight, "t", slog.Default(), 0)
	defer c.close(ErrPublisherClosed)
	var first, second []ReceiptOutcome
	ctx := context.Background()

	t1, ok, err := c.begin(ctx, false, func(r Result) { first = append(first, r.Outcome) })
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	t1.SetRecipients(1)
	c.published(t1)
	c.mu.Lock()
	stale := t1.word.Load() // what the timeout goroutine read before settling it
	c.mu.Unlock()
	t1.release() // the publish returned
	if !t1.ack() {
		t.Fatal("the first publish's ack did not settle it")
	}

	t2, ok, err := c.begin(ctx, false, func(r Result) { second = append(second, r.Outcome) })
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if t2 != t1 {
		t.Fatal("the settled ticket was not recycled")
	}
	t2.SetRecipients(1)
	c.published(t2)
	t2.release()
	if t1.resolveFrom(stale, Result{Outcome: TimedOut}) {
		t.Fatal("a stale timeout settled the recycled ticket")
	}
	if len(second) != 0 {
		t.Fatalf("second publish settled by a stale timeout: %v", second)
	}
	if !t2.ack() || len(first) != 1 || first[0] != Acked || len(second) != 1 || second[0] != Acked {
		t.Fatalf("outcomes: first %v, second %v; want [acked] [acked]", first, second)
	}
}
