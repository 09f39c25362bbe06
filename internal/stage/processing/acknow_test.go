package processing_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// Guarantee: a message acknowledged immediately is reported by its
// processor, grouped with its chunk (one Ack call per acknowledger per
// chunk), before it reaches its batcher; the batcher gets a copy that is
// marked acknowledged and carries nothing of the source; a message that
// then fails in the same processor is reported once, as failed; messages
// that did not ask are left to the batch stage.
func TestAckImmediatelyReportsBeforeTheBatcher(t *testing.T) {
	recA, recB := acker.NewRecorder(false), acker.NewRecorder(false)
	route := &fakeRoute[int]{}
	var chunks atomic.Int32
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1, MaxDemand: 100,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			chunks.Add(1)
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data%2 == 1 {
				m.AckImmediately()
			}
			if m.Data == 7 {
				return 0, errors.New("seven")
			}
			return m.Data * 10, nil
		},
	}, processing.NamedRoute[int]{Name: message.DefaultBatcher, Route: route})
	run(t, s)
	var in []*message.Message[int]
	for i := range 10 {
		rec := recA
		if i >= 5 {
			rec = recB
		}
		m := message.New(i, rec, uint64(i))
		m.Metadata = "from the source"
		in = append(in, m)
	}
	publish(t, s, in)
	drain(t, s)

	// Odd ids asked: 1, 3 to recA, 5, 9 to recB as successes, 7 failed.
	assertOnce(t, recA, []uint64{1, 3})
	assertOnce(t, recB, []uint64{5, 7, 9})
	if f := recB.Failed(); len(f) != 1 || f[0].ID != 7 {
		t.Errorf("recB failed outcomes %+v, want only 7", f)
	}
	for _, rec := range []*acker.Recorder{recA, recB} {
		if calls := len(rec.Calls()); calls > int(chunks.Load()) {
			t.Errorf("%d Ack calls for %d chunks: outcomes not grouped per chunk", calls, chunks.Load())
		}
	}
	routed := route.routed()
	if len(routed) != 9 {
		t.Fatalf("%d messages routed, want 9 (all but the failed one)", len(routed))
	}
	for _, m := range routed {
		asked := m.Data/10%2 == 1
		a, _, _ := m.Acknowledger()
		if asked != m.Acknowledged() {
			t.Errorf("routed %v: Acknowledged = %v, want %v", m, m.Acknowledged(), asked)
		}
		if asked && (m.Metadata != nil || a != acker.Discard || m.Data%10 != 0) {
			t.Errorf("routed copy of %d keeps its source (metadata %v, acknowledger %T) or lost its payload", m.Data, m.Metadata, a)
		}
		if asked {
			for _, orig := range in {
				if orig == m {
					t.Errorf("message %d acknowledged immediately was routed itself, not a copy", m.Data)
				}
			}
		}
	}
}

// Guarantee: with MinDemand a processor takes chunks of at most MaxDemand −
// MinDemand messages, and every message is still handled once.
func TestMinDemandShrinksChunks(t *testing.T) {
	rec := acker.NewRecorder(false)
	var largest atomic.Int32
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1, MaxDemand: 10, MinDemand: 7,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			for n := int32(len(msgs)); ; {
				old := largest.Load()
				if n <= old || largest.CompareAndSwap(old, n) {
					break
				}
			}
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 50))
	drain(t, s)
	assertOnce(t, rec, seq(0, 50))
	if n := largest.Load(); n > 3 || n == 0 {
		t.Errorf("largest chunk %d, want 1..3 (MaxDemand 10 − MinDemand 7)", n)
	}
}

// Guarantee: AckImmediately on a deferred message changes nothing: the
// processor reports nothing for it and hands the message itself to its
// batcher, with its Metadata and acknowledger, so that the code that
// deferred it can report its outcome from the batch stage, to the
// acknowledger Acknowledger returns there.
func TestAckImmediatelyChangesNothingOnDeferredMessage(t *testing.T) {
	rec := acker.NewRecorder(false)
	route := &fakeRoute[int]{}
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			m.Defer()
			m.AckImmediately()
			return m.Data, nil
		},
	}, processing.NamedRoute[int]{Name: message.DefaultBatcher, Route: route})
	run(t, s)
	in := ints(rec, 0, 3)
	for _, m := range in {
		m.Metadata = "from the source"
	}
	publish(t, s, in)
	drain(t, s)

	if n := rec.Total(); n != 0 {
		t.Fatalf("the processor reported %d outcomes of deferred messages, want none", n)
	}
	routed := route.routed()
	if len(routed) != len(in) {
		t.Fatalf("%d messages routed, want %d", len(routed), len(in))
	}
	// The deferrer reports each outcome from the batch stage.
	for i, m := range routed {
		if m != in[i] || m.Metadata != "from the source" {
			t.Errorf("routed %v (metadata %v), want the deferred message itself", m, m.Metadata)
		}
		a, id, data := m.Acknowledger()
		a.Ack(t.Context(), []acker.Outcome{{ID: id, Data: data}}, nil)
	}
	assertOnce(t, rec, seq(0, 3))
}

// Guarantee: in a pipeline without batchers, the processor does not touch
// a message its handler deferred once the handler has returned: the
// deferrer may report the outcome at once, from another goroutine, to an
// acknowledger that reads the payload (Outcome.Message). Run with -race: a
// write to the message after the handler returned is a data race with that
// acknowledger.
func TestDeferredMessageNotTouchedAfterHandlerWithoutBatchers(t *testing.T) {
	payload := make(chan int, 1)
	ack := acker.Func(func(_ context.Context, successful, _ []acker.Outcome) {
		for _, o := range successful {
			payload <- o.Message.(*message.Message[int]).Data
		}
	})
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			m.Defer()
			go func() { // a tracked publish that resolves at once
				a, _, _ := m.Acknowledger()
				a.Ack(context.Background(), []acker.Outcome{m.Outcome()}, nil)
			}()
			return m.Data + 1, nil
		},
	})
	run(t, s)
	publish(t, s, []*message.Message[int]{message.New(1, &ack, 1)})
	select {
	case <-payload:
	case <-time.After(patience):
		t.Fatal("timed out waiting for the deferred outcome")
	}
	drain(t, s)
}
