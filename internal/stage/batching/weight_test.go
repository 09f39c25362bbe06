package batching_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
)

// weightOfData weighs a message by its payload.
func weightOfData(m *message.Message[int]) int { return m.Data }

// Guarantee: with Weight and MaxWeight a batch closes, with trigger weight,
// before a message would push its total past MaxWeight (that message starts
// the next batch) and as soon as its total reaches MaxWeight; BatchInfo
// carries the total; a message heavier than MaxWeight goes alone.
func TestWeightClosesBatchBeforeMaxWeight(t *testing.T) {
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{Name: "w", BatchSize: 100, BatchTimeout: never, Weight: weightOfData, MaxWeight: 10})
	// Payloads are weights; ids are their positions.
	weights := []int{4, 4, 3, 6, 4, 25, 1, 2}
	in := make([]*message.Message[int], len(weights))
	for i, w := range weights {
		in[i] = message.New(w, rec, uint64(i))
	}
	h.publish(t, in...)
	want := []struct {
		data    []int
		weight  int
		trigger message.Trigger
	}{
		{[]int{4, 4}, 8, message.TriggerWeight}, // 3 more would make 11
		{[]int{3, 6}, 9, message.TriggerWeight}, // 4 more would make 13
		{[]int{4}, 4, message.TriggerWeight},    // 25 more would make 29
		{[]int{25}, 25, message.TriggerWeight},  // alone, over MaxWeight
	}
	for i, w := range want {
		b := h.next(t)
		if !slices.Equal(b.ids, w.data) || b.info.Weight != w.weight || b.info.Trigger != w.trigger || b.info.Size != len(w.data) {
			t.Errorf("batch %d: data %v %+v, want data %v weight %d trigger %s", i, b.ids, b.info, w.data, w.weight, w.trigger)
		}
	}
	h.none(t, "1 and 2 weigh 3 < MaxWeight: their batch waits")
	rest := h.drain(t)
	if len(rest) != 1 || !slices.Equal(rest[0].ids, []int{1, 2}) || rest[0].info.Weight != 3 || rest[0].info.Trigger != message.TriggerFlush {
		t.Errorf("after drain: %+v, want one flush batch [1 2] of weight 3", rest)
	}
	assertOnce(t, rec, span(0, len(weights)))
}

// Guarantee: a batch that reaches exactly MaxWeight is emitted at once with
// trigger weight; BatchSize still closes batches first when it is reached
// first, and weights never mix batch keys.
func TestWeightReachedExactlyAndSizeKept(t *testing.T) {
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{Name: "w", BatchSize: 3, BatchTimeout: never, Weight: weightOfData, MaxWeight: 10})
	h.publish(t, msg(rec, 5, "a"), msg(rec, 9, "b"), msg(rec, 5, "a"))
	b := h.next(t)
	if !slices.Equal(b.ids, []int{5, 5}) || b.info.BatchKey != "a" || b.info.Trigger != message.TriggerWeight || b.info.Weight != 10 {
		t.Errorf("first batch %v %+v, want [5 5] of key a, weight 10, trigger weight", b.ids, b.info)
	}
	h.publish(t, msg(rec, 1, "c"), msg(rec, 1, "c"), msg(rec, 1, "c"))
	b = h.next(t)
	if !slices.Equal(b.ids, []int{1, 1, 1}) || b.info.Trigger != message.TriggerSize || b.info.Weight != 3 {
		t.Errorf("second batch %v %+v, want [1 1 1] with trigger size and weight 3", b.ids, b.info)
	}
	h.none(t, "key b weighs 9 < 10")
	rest := h.drain(t)
	if len(rest) != 1 || rest[0].info.BatchKey != "b" || rest[0].info.Weight != 9 {
		t.Errorf("after drain: %+v, want key b's batch of weight 9", rest)
	}
}

// Guarantee: a negative weight counts as 0, and a panicking Weight fails
// only its message, which joins no batch and is acknowledged once.
func TestWeightNegativeAndPanic(t *testing.T) {
	rec := acker.NewRecorder(false)
	weight := func(m *message.Message[int]) int {
		if m.Data == 99 {
			panic("cannot weigh")
		}
		return m.Data
	}
	h := start(t, batcher.Options[int]{Name: "w", BatchSize: 100, BatchTimeout: never, Weight: weight, MaxWeight: 10})
	h.publish(t, message.New(-50, rec, 0), message.New(99, rec, 1), message.New(10, rec, 2))
	b := h.next(t)
	if !slices.Equal(b.ids, []int{-50, 10}) || b.info.Weight != 10 || b.info.Trigger != message.TriggerWeight {
		t.Errorf("batch %v %+v, want [-50 10] of weight 10 (the negative weight counts 0)", b.ids, b.info)
	}
	h.drain(t)
	assertOnce(t, rec, []int{0, 1, 2})
	var pe *message.PanicError
	for _, o := range rec.Failed() {
		if o.ID == 1 && errors.As(o.Err, &pe) {
			return
		}
	}
	t.Errorf("message 1 not failed with a *message.PanicError: %+v", rec.Failed())
}

// Guarantee: a batcher partition takes at most MaxDemand messages from its
// queue at once: the messages it acknowledges on arrival (those a
// panicking Weight failed) are flushed per turn, so no Ack call carries
// more than MaxDemand of them.
func TestMaxDemandBoundsATurn(t *testing.T) {
	rec := acker.NewRecorder(false)
	weight := func(*message.Message[int]) int { panic("no weight") }
	h := start(t, batcher.Options[int]{Name: "d", BatchTimeout: never, MaxDemand: 3, Weight: weight, MaxWeight: 10})
	h.publish(t, msgs(rec, 0, 10, "")...)
	h.drain(t)
	assertOnce(t, rec, span(0, 10))
	for _, c := range rec.Calls() {
		if n := len(c.Successful) + len(c.Failed); n > 3 {
			t.Errorf("one turn acknowledged %d messages, want at most MaxDemand 3", n)
		}
	}
}

// Guarantee: a message heavier than MaxWeight that opens a batch (the first
// message of its key, or the first after its key's batch was emitted) goes
// alone in a batch of trigger weight: no empty batch is emitted before it.
func TestAMessageHeavierThanMaxWeightOpeningABatchGoesAlone(t *testing.T) {
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{Name: "w", BatchSize: 100, BatchTimeout: never, Weight: weightOfData, MaxWeight: 10})
	h.publish(t, message.New(25, rec, 0), message.New(10, rec, 1), message.New(30, rec, 2))
	for i, want := range []int{25, 10, 30} {
		b := h.next(t)
		if !slices.Equal(b.ids, []int{want}) || b.info.Size != 1 || b.info.Weight != want || b.info.Trigger != message.TriggerWeight {
			t.Errorf("batch %d: data %v %+v, want [%d] alone, of weight %[4]d and trigger weight", i, b.ids, b.info, want)
		}
	}
	if rest := h.drain(t); len(rest) != 0 {
		t.Errorf("after drain: %+v, want no more batches", rest)
	}
	assertOnce(t, rec, []int{0, 1, 2})
}
