package source_test

import (
	"context"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// Guarantee: MaxBatch is only an upper bound (a batch never exceeds the
// feed's permits), so a source asked for "as many as the window allows"
// (MaxBatchLimit) neither panics nor allocates MaxBatch items up front, and
// delivers every message.
func TestLargestMaxBatchIsBoundedByTheWindow(t *testing.T) {
	h := newTopic(t, "t", topic.Options{})
	var src *source.Source[int]
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("New panicked with MaxBatch %d: %v", source.MaxBatchLimit, r)
			}
		}()
		var err error
		src, err = source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"), MaxBatch: source.MaxBatchLimit})
		if err != nil {
			t.Fatal(err)
		}
	}()
	got := newCounter()
	run(t, pipeline.Options[int, int]{
		Name:     "b",
		Producer: producer.Options[int]{Source: src, Concurrency: 2},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			got.add(m.Data, member(m))
			return m.Data, nil
		}},
	})
	for i := range 300 {
		if err := h.Publish(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every message handled", func() bool { return got.count() == 300 })
}

// Guarantee: the source takes at most MaxBatch messages from its
// subscription at once, however many permits its feed holds.
func TestMaxBatchBoundsEachReceive(t *testing.T) {
	b, h := heldTopic(t, topic.Options{})
	b.releaseAll() // the subscriptions' Close returns at once
	src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"), MaxBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	run(t, pipeline.Options[int, int]{
		Name:       "b",
		Producer:   producer.Options[int]{Source: src, Flow: producer.Flow{Initial: 100}},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	sub := b.sub(t, 0)
	sub.in <- topic.Envelope[int]{ID: 1, Value: 1}
	wait.For(t, "the message received", func() bool { return src.Stats().Received == 1 })
	if w := sub.widest.Load(); w != 3 {
		t.Fatalf("the source asked its subscription for up to %d messages at once with 100 permits, want MaxBatch 3", w)
	}
}
