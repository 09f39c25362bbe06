package acker_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// partitionAck is an acknowledger for one partition of a consumer.
type partitionAck struct{ rec acker.Recorder }

func (p *partitionAck) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	p.rec.Ack(ctx, successful, failed)
}

// consumerAck is an acknowledger whose first field is another one, so that
// a pointer to it and a pointer to its partition hold the same address.
type consumerAck struct {
	partition partitionAck
	rec       acker.Recorder
}

func (c *consumerAck) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	c.rec.Ack(ctx, successful, failed)
}

// Guarantee: acknowledgers are told apart by their whole identity, type
// and value: two of different types that share an address (a struct and
// its first field) each get their own outcomes, in one call of their own.
func TestGroupKeepsApartAcknowledgersThatShareAnAddress(t *testing.T) {
	var c consumerAck
	var g acker.Group
	for id := range uint64(6) {
		if id%2 == 0 {
			g.Add(&c, acker.Outcome{ID: id})
		} else {
			g.Add(&c.partition, acker.Outcome{ID: id, Err: context.Canceled})
		}
	}
	g.Flush(context.Background(), nil)
	for name, want := range map[string]struct {
		rec    *acker.Recorder
		failed bool
	}{"consumer": {&c.rec, false}, "partition": {&c.partition.rec, true}} {
		calls := want.rec.Calls()
		if len(calls) != 1 {
			t.Fatalf("the %s acknowledger got %d calls, want 1", name, len(calls))
		}
		got := calls[0].Successful
		if want.failed {
			got = calls[0].Failed
		}
		if len(got) != 3 || want.rec.Total() != 3 {
			t.Fatalf("the %s acknowledger got %+v, want its 3 outcomes alone", name, calls[0])
		}
		for _, o := range got {
			if (o.ID%2 == 1) != want.failed {
				t.Fatalf("the %s acknowledger got outcome %d of the other one", name, o.ID)
			}
		}
	}
}

// Guarantee: outcomes a Group discarded with Reset are never reported,
// not even by a later Flush of the same Group; what is added after the
// Reset is.
func TestGroupResetOutcomesAreNeverReported(t *testing.T) {
	a, b := acker.NewRecorder(false), acker.NewRecorder(false)
	var g acker.Group
	g.Add(a, acker.Outcome{ID: 1})
	g.Add(b, acker.Outcome{ID: 2, Err: context.Canceled})
	g.Reset()
	if g.Len() != 0 {
		t.Fatalf("Len after Reset = %d, want 0", g.Len())
	}
	g.Add(b, acker.Outcome{ID: 3})
	g.Flush(context.Background(), nil)
	if a.Total() != 0 {
		t.Fatalf("a discarded outcome was reported: %+v", a.Calls())
	}
	if calls := b.Calls(); len(calls) != 1 || b.Total() != 1 || len(calls[0].Successful) != 1 || calls[0].Successful[0].ID != 3 {
		t.Fatalf("acknowledger got %+v, want outcome 3 alone", calls)
	}
}
