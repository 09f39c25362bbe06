package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// tally is the source's acknowledger. A real source would commit offsets or
// ack broker messages here; this one counts outcomes, so the example can
// show that every order was accounted for exactly once.
//
// The pipeline calls Ack once per acknowledger per chunk (from a processor,
// for failed orders) or per batch (from a batch processor, for billed
// orders), never once per message, and from several goroutines at once, so
// the counters are guarded by a mutex taken once per call.
type tally struct {
	mu        sync.Mutex
	calls     int
	ok        int
	failed    map[error]int // by rejection reason (one of failureReasons, or errOther)
	example   map[error]string
	discarded int      // failed orders the failure hook marked as done with
	seen      []uint64 // bit set of acknowledged order ids
	dupes     int      // orders acknowledged more than once
}

// errOther is the failure reason for an error that is none of failureReasons.
var errOther = errors.New("other")

func newTally() *tally {
	return &tally{failed: make(map[error]int), example: make(map[error]string)}
}

// Ack implements acker.Acknowledger. The outcomes are only valid during the
// call, so nothing from them is kept but counts and one error string per
// reason.
func (t *tally) Ack(_ context.Context, successful, failed []acker.Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls++
	t.ok += len(successful)
	for _, o := range successful {
		t.mark(o.ID)
	}
	for _, o := range failed {
		t.mark(o.ID)
		reason := errOther
		for _, r := range failureReasons {
			if errors.Is(o.Err, r) {
				reason = r
				break
			}
		}
		t.failed[reason]++
		if _, ok := t.example[reason]; !ok {
			t.example[reason] = o.Err.Error()
		}
		if o.Disposition == acker.DispositionDiscard {
			t.discarded++
		}
	}
}

// mark records that order id was acknowledged and counts it if it already
// was. t.mu must be held.
func (t *tally) mark(id uint64) {
	w, bit := id/64, uint64(1)<<(id%64)
	if w >= uint64(len(t.seen)) {
		t.seen = append(t.seen, make([]uint64, int(w)+1-len(t.seen))...)
	}
	if t.seen[w]&bit != 0 {
		t.dupes++
	}
	t.seen[w] |= bit
}

// billing is the batch handler of the billing batcher: for each batch (the
// orders of one customer) it would write an invoice line; here it adds the
// batch to the per-customer totals and prints the first few batches of each
// customer, so the output shows batching at work without scrolling away.
//
// The batcher runs several batch processors, so handle is called
// concurrently and the totals are guarded by a mutex.
type billing struct {
	out    io.Writer
	sample int // batches printed per customer

	mu        sync.Mutex
	customers map[string]*customerTotals
	byTrigger [3]int // indexed by message.Trigger
}

type customerTotals struct {
	batches  int
	orders   int
	eurCents int64
}

func newBilling(out io.Writer, sample int) *billing {
	return &billing{out: out, sample: sample, customers: make(map[string]*customerTotals)}
}

// handle is a batcher.Handler. Returning an error would fail every order of
// the batch; calling m.Fail on one order would fail only that one.
func (b *billing) handle(_ context.Context, batch []*message.Message[Order], info message.BatchInfo) error {
	var sum int64
	for _, m := range batch {
		sum += m.Data.AmountEURCents
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.customers[info.BatchKey]
	if c == nil {
		c = &customerTotals{}
		b.customers[info.BatchKey] = c
	}
	c.batches++
	c.orders += len(batch)
	c.eurCents += sum
	if int(info.Trigger) < len(b.byTrigger) {
		b.byTrigger[info.Trigger]++
	}
	if c.batches <= b.sample {
		fmt.Fprintf(b.out, "  batch %-12s #%d  %3d orders  %12s EUR  trigger=%s\n",
			info.BatchKey, c.batches, info.Size, euros(sum), info.Trigger)
	}
	return nil
}

// results is everything the example learned from one run.
type results struct {
	topology    string
	elapsed     time.Duration
	interrupted bool // ctx was cancelled: the source stopped before n orders
	generated   int
	byKind      [numKinds]int

	ackCalls  int
	ok        int
	failed    map[error]int
	example   map[error]string
	discarded int
	dupes     int

	customers map[string]customerTotals
	byTrigger [3]int
}

func collect(src *orderSource, t *tally, b *billing) *results {
	r := &results{}
	r.generated, r.byKind = src.Generated()

	t.mu.Lock()
	r.ackCalls, r.ok, r.discarded, r.dupes = t.calls, t.ok, t.discarded, t.dupes
	r.failed = make(map[error]int, len(t.failed))
	r.example = make(map[error]string, len(t.example))
	for k, v := range t.failed {
		r.failed[k] = v
		r.example[k] = t.example[k]
	}
	t.mu.Unlock()

	b.mu.Lock()
	r.customers = make(map[string]customerTotals, len(b.customers))
	for k, v := range b.customers {
		r.customers[k] = *v
	}
	r.byTrigger = b.byTrigger
	b.mu.Unlock()
	return r
}

// totalFailed is the number of failed outcomes over all reasons.
func (r *results) totalFailed() int {
	n := 0
	for _, v := range r.failed {
		n += v
	}
	return n
}

// check verifies the bookkeeping: every generated order was acknowledged
// exactly once, every malformed one failed for the reason it was made up
// with, and every successful one was billed.
func (r *results) check() error {
	var errs []error
	if got := r.ok + r.totalFailed(); got != r.generated {
		errs = append(errs, fmt.Errorf("%d orders generated but %d acknowledged", r.generated, got))
	}
	if r.dupes > 0 {
		errs = append(errs, fmt.Errorf("%d orders acknowledged more than once", r.dupes))
	}
	for k := kindValid + 1; k < numKinds; k++ {
		if got, want := r.failed[k.reason()], r.byKind[k]; got != want {
			errs = append(errs, fmt.Errorf("%d orders failed with %q, %d were generated malformed that way", got, k.reason(), want))
		}
	}
	if n := r.failed[errOther] + r.failed[errMissingField]; n > 0 {
		errs = append(errs, fmt.Errorf("%d orders failed for a reason the source never generated", n))
	}
	billed := 0
	for _, c := range r.customers {
		billed += c.orders
	}
	if billed != r.ok {
		errs = append(errs, fmt.Errorf("%d orders acknowledged ok but %d billed", r.ok, billed))
	}
	return errors.Join(errs...)
}

// print writes the final report: topology, per-customer table, totals and
// throughput.
func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "\ntopology:\n%s", r.topology)

	fmt.Fprintf(w, "\nper customer:\n")
	names := make([]string, 0, len(r.customers))
	width := len("customer")
	for name := range r.customers {
		names = append(names, name)
		width = max(width, len(name))
	}
	// Busiest customers first.
	slices.SortFunc(names, func(a, b string) int {
		if d := r.customers[b].orders - r.customers[a].orders; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintf(w, "  %-*s  %7s  %7s  %13s\n", width, "customer", "batches", "orders", "total EUR")
	for _, name := range names {
		c := r.customers[name]
		fmt.Fprintf(w, "  %-*s  %7d  %7d  %13s\n", width, name, c.batches, c.orders, euros(c.eurCents))
	}

	malformed := r.generated - r.byKind[kindValid]
	if r.interrupted {
		fmt.Fprintf(w, "\ninterrupted: the source stopped early; the drain handled every order it had generated\n")
	}
	fmt.Fprintf(w, "\ntotals:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  orders generated\t%d\t(%d malformed)\n", r.generated, malformed)
	fmt.Fprintf(tw, "  acknowledged ok\t%d\n", r.ok)
	fmt.Fprintf(tw, "  failed\t%d\t(%d with disposition discard)\n", r.totalFailed(), r.discarded)
	for _, reason := range append(slices.Clone(failureReasons), errOther) {
		if n := r.failed[reason]; n > 0 {
			fmt.Fprintf(tw, "    %s\t%d\te.g. %s\n", reason, n, r.example[reason])
		}
	}
	batches := r.byTrigger[message.TriggerSize] + r.byTrigger[message.TriggerTimeout] + r.byTrigger[message.TriggerFlush]
	fmt.Fprintf(tw, "  batches\t%d\t(size %d, timeout %d, flush %d)\n", batches,
		r.byTrigger[message.TriggerSize], r.byTrigger[message.TriggerTimeout], r.byTrigger[message.TriggerFlush])
	fmt.Fprintf(tw, "  Ack calls\t%d\t(%.1f outcomes per call)\n", r.ackCalls, perCall(r.ok+r.totalFailed(), r.ackCalls))
	tw.Flush()

	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "\n%d messages in %s: %.0f messages/s\n",
		r.ok+r.totalFailed(), r.elapsed.Round(time.Millisecond), float64(r.ok+r.totalFailed())/max(secs, 1e-9))
}

func perCall(outcomes, calls int) float64 {
	if calls == 0 {
		return 0
	}
	return float64(outcomes) / float64(calls)
}

// euros formats an amount of euro cents as "1234.56".
func euros(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}
