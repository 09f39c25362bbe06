package acker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Guarantee: a Group makes exactly one Ack call per acknowledger, with the
// successful and failed outcomes split and in the order they were added.
func TestGroupOneCallPerAcknowledger(t *testing.T) {
	a, b := acker.NewRecorder(false), acker.NewRecorder(false)
	var g acker.Group
	errBad := context.Canceled
	for i := range uint64(10) {
		o := acker.Outcome{ID: i}
		if i%3 == 0 {
			o.Err = errBad
		}
		if i%2 == 0 {
			g.Add(a, o)
		} else {
			g.Add(b, o)
		}
	}
	if g.Len() != 10 {
		t.Fatalf("Len = %d, want 10", g.Len())
	}
	g.Flush(context.Background(), nil)
	if g.Len() != 0 {
		t.Fatalf("Len after Flush = %d", g.Len())
	}
	for name, r := range map[string]*acker.Recorder{"a": a, "b": b} {
		calls := r.Calls()
		if len(calls) != 1 {
			t.Fatalf("acknowledger %s got %d calls, want 1", name, len(calls))
		}
		for _, o := range calls[0].Failed {
			if o.ID%3 != 0 || o.Err != errBad {
				t.Fatalf("%s: outcome %d in failed list", name, o.ID)
			}
		}
		for _, o := range calls[0].Successful {
			if o.ID%3 == 0 {
				t.Fatalf("%s: failed outcome %d in successful list", name, o.ID)
			}
		}
		if len(calls[0].Failed)+len(calls[0].Successful) != 5 {
			t.Fatalf("%s got %d outcomes, want 5", name, len(calls[0].Failed)+len(calls[0].Successful))
		}
	}
	// Reuse: a second round makes a second call each, nothing carried over.
	g.Add(a, acker.Outcome{ID: 99})
	g.Flush(context.Background(), nil)
	if calls := a.Calls(); len(calls) != 2 || len(calls[1].Successful) != 1 || calls[1].Successful[0].ID != 99 {
		t.Fatalf("second round: %+v", calls)
	}
	if len(b.Calls()) != 1 {
		t.Fatal("an acknowledger with no outcomes in a round must not be called")
	}
}

// Guarantee: a panicking acknowledger is recovered and logged, and the other
// acknowledgers of the same group are still called.
func TestGroupRecoversPanickingAcknowledger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	bad := acker.Func(func(context.Context, []acker.Outcome, []acker.Outcome) { panic("broken acker") })
	good := acker.NewRecorder(false)
	var g acker.Group
	g.Add(&bad, acker.Outcome{ID: 1})
	g.Add(good, acker.Outcome{ID: 2})
	g.Flush(context.Background(), log)
	if good.Total() != 1 {
		t.Fatal("the healthy acknowledger was not called")
	}
	if !strings.Contains(buf.String(), "acknowledger panicked") || !strings.Contains(buf.String(), "broken acker") {
		t.Fatalf("panic not logged: %s", buf.String())
	}
}

// Guarantee: a nil acknowledger means Discard.
func TestGroupNilAcknowledgerIsDiscard(t *testing.T) {
	var g acker.Group
	g.Add(nil, acker.Outcome{ID: 1})
	g.Flush(context.Background(), nil) // must not panic
}

// Guarantee: steady-state grouping does not allocate.
func TestGroupDoesNotAllocate(t *testing.T) {
	var g acker.Group
	a := acker.Discard
	g.Add(a, acker.Outcome{ID: 1})
	g.Flush(context.Background(), nil)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range uint64(32) {
			g.Add(a, acker.Outcome{ID: i})
		}
		g.Flush(context.Background(), nil)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per chunk, want 0", allocs)
	}
}

// Guarantee: Recorder counts per ID and Wait returns once enough outcomes
// arrived, or with ctx's error.
func TestRecorderWait(t *testing.T) {
	r := acker.NewRecorder(false)
	done := make(chan error, 1)
	go func() { done <- r.Wait(context.Background(), 3) }()
	r.Ack(context.Background(), []acker.Outcome{{ID: 1}, {ID: 2}}, nil)
	r.Ack(context.Background(), nil, []acker.Outcome{{ID: 1, Err: context.Canceled}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Count(1) != 2 || r.Count(2) != 1 || r.FailedCount() != 1 || len(r.Successful()) != 2 || len(r.Failed()) != 1 {
		t.Fatalf("counts %v", r.Counts())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx, 4); err != context.DeadlineExceeded {
		t.Fatalf("Wait = %v, want deadline exceeded", err)
	}
}

func TestDispositionString(t *testing.T) {
	for d, want := range map[acker.Disposition]string{acker.DispositionDefault: "default", acker.DispositionRetry: "retry", acker.DispositionDiscard: "discard", 9: "Disposition(9)"} {
		if d.String() != want {
			t.Fatalf("%d.String() = %q, want %q", d, d.String(), want)
		}
	}
}

// Guarantee: WrapShutdown keeps the wrapped error visible to errors.Is and
// wraps only once.
func TestWrapShutdown(t *testing.T) {
	err := acker.WrapShutdown(context.Canceled)
	if !errors.Is(err, acker.ErrShutdown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v does not wrap both ErrShutdown and context.Canceled", err)
	}
	if again := acker.WrapShutdown(err); again != err {
		t.Fatalf("wrapping twice gave %v, want the same error", again)
	}
	if acker.WrapShutdown(nil) != nil {
		t.Fatal("WrapShutdown(nil) is not nil")
	}
	if !acker.Interrupted(acker.Outcome{Err: err}) || acker.Interrupted(acker.Outcome{Err: context.Canceled}) {
		t.Fatal("Interrupted does not follow ErrShutdown")
	}
}

// Guarantee: an outcome filled in through Slot reaches its acknowledger as
// Add would have delivered it, in the list Slot was asked for, in order
// with the outcomes added by value; slots reused after a Flush start zero.
func TestGroupSlotFillsInPlace(t *testing.T) {
	r := acker.NewRecorder(false)
	var g acker.Group
	errBad := errors.New("bad")
	o := g.Slot(r, false)
	o.ID, o.Data = 1, "one"
	g.Add(r, acker.Outcome{ID: 2})
	o = g.Slot(r, true)
	o.ID, o.Err, o.Disposition = 3, errBad, acker.DispositionRetry
	g.Flush(context.Background(), nil)
	calls := r.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d Ack calls, want 1", len(calls))
	}
	ok, failed := calls[0].Successful, calls[0].Failed
	if len(ok) != 2 || ok[0].ID != 1 || ok[0].Data != "one" || ok[1].ID != 2 {
		t.Fatalf("successful outcomes %+v, want IDs 1 (with its data) and 2", ok)
	}
	if len(failed) != 1 || failed[0].ID != 3 || failed[0].Err != errBad || failed[0].Disposition != acker.DispositionRetry {
		t.Fatalf("failed outcomes %+v, want ID 3 with its error and disposition", failed)
	}
	// The next round reuses the slots: a fresh one carries nothing over.
	o = g.Slot(r, true)
	if o.ID != 0 || o.Data != nil || o.Err != nil || o.Disposition != 0 || o.Message != nil {
		t.Fatalf("a reused slot is not zero: %+v", *o)
	}
	o.Err = errBad
	g.Flush(context.Background(), nil)
}
