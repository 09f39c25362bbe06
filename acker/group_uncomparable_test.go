package acker_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// tally counts the outcomes its acknowledgers receive, by ID, and the calls.
type tally struct {
	mu    sync.Mutex
	ids   map[uint64]int
	calls int
}

func (t *tally) ack(successful, failed []acker.Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ids == nil {
		t.ids = make(map[uint64]int)
	}
	t.calls++
	for _, o := range slices.Concat(successful, failed) {
		t.ids[o.ID]++
	}
}

// sliceAcker is an acknowledger whose values cannot be compared: it holds
// a slice.
type sliceAcker struct {
	tags []string
	t    *tally
}

func (a sliceAcker) Ack(_ context.Context, successful, failed []acker.Outcome) {
	a.t.ack(successful, failed)
}

// boxAcker is comparable as a type, but a value holding an uncomparable
// one in its interface field is not.
type boxAcker struct {
	box any
	t   *tally
}

func (a boxAcker) Ack(_ context.Context, successful, failed []acker.Outcome) {
	a.t.ack(successful, failed)
}

// Guarantee: an acknowledger whose value cannot be compared (a struct
// holding a slice, or an interface field holding one) does not crash the
// Group: it receives each of its outcomes exactly once, in a call of its
// own, and the comparable acknowledgers of the same group are still
// called once each with theirs, round after round.
func TestGroupDeliversToAnUncomparableAcknowledgerOnce(t *testing.T) {
	for name, mk := range map[string]func(*tally) acker.Acknowledger{
		"slice field":     func(t *tally) acker.Acknowledger { return sliceAcker{tags: []string{"x"}, t: t} },
		"interface field": func(t *tally) acker.Acknowledger { return boxAcker{box: []int{1}, t: t} },
	} {
		t.Run(name, func(t *testing.T) {
			var odd tally
			bad := mk(&odd)
			good := acker.NewRecorder(false)
			var g acker.Group
			for round := range uint64(3) {
				for i := range uint64(6) {
					id := 10*round + i
					o := acker.Outcome{ID: id}
					if i == 4 {
						o.Err = context.Canceled
					}
					if i%2 == 0 {
						g.Add(bad, o)
					} else {
						g.Add(good, o)
					}
				}
				g.Flush(context.Background(), nil)
			}
			if len(odd.ids) != 9 {
				t.Fatalf("the uncomparable acknowledger got %d distinct outcomes, want 9", len(odd.ids))
			}
			for id, n := range odd.ids {
				if n != 1 || id%2 != 0 {
					t.Fatalf("the uncomparable acknowledger got outcome %d %d times", id, n)
				}
			}
			if calls := good.Calls(); len(calls) != 3 || good.Total() != 9 {
				t.Fatalf("the comparable acknowledger got %d calls with %d outcomes, want 3 with 9", len(calls), good.Total())
			}
		})
	}
}

// BenchmarkGroup measures grouping outcomes: a chunk of 64 for one
// acknowledger, 64 spread over two, and 64 rounds of a single outcome (a
// batcher of BatchSize 1), each then flushed. It must not allocate in the
// steady state.
func BenchmarkGroup(b *testing.B) {
	nop := acker.Func(func(context.Context, []acker.Outcome, []acker.Outcome) {})
	other := acker.Func(func(context.Context, []acker.Outcome, []acker.Outcome) {})
	for _, bc := range []struct {
		name   string
		rounds int
		per    int
		acks   []acker.Acknowledger
	}{
		{"chunk64", 1, 64, []acker.Acknowledger{&nop}},
		{"chunk64x2", 1, 64, []acker.Acknowledger{&nop, &other}},
		{"single64", 64, 1, []acker.Acknowledger{&nop}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var g acker.Group
			ctx := context.Background()
			for b.Loop() {
				for range bc.rounds {
					for i := range bc.per {
						*g.Slot(bc.acks[i%len(bc.acks)], false) = acker.Outcome{ID: uint64(i)}
					}
					g.Flush(ctx, nil)
				}
			}
		})
	}
}
