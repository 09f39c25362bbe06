package processing_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// heldRoute is a Route that takes messages only once released (or when ctx
// ends), like a busy batcher; entered is signalled when a Publish starts.
type heldRoute[T any] struct {
	entered chan struct{}
	release chan struct{}
}

func (r *heldRoute[T]) Publish(ctx context.Context, msgs []*message.Message[T]) (int, error) {
	select {
	case r.entered <- struct{}{}:
	default:
	}
	select {
	case <-r.release:
		return len(msgs), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Guarantee: a processor acknowledges a chunk's failed messages before it
// forwards the chunk's successful messages to batchers, so a busy batcher
// does not hold those outcomes back.
func TestFailedAckedBeforeForwardingToBatchers(t *testing.T) {
	rec := acker.NewRecorder(false)
	route := &heldRoute[int]{entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 0 {
				return 0, errors.New("bad 0")
			}
			return m.Data, nil
		},
	}, processing.NamedRoute[int]{Name: message.DefaultBatcher, Route: route})
	// Queued before the processor starts, the two messages form one chunk.
	publish(t, s, ints(rec, 0, 2))
	run(t, s)
	waitDone(t, route.entered, "the chunk's successful message to be forwarded")
	waitAcks(t, rec, 1) // while the batcher is still busy
	if f := rec.Failed(); len(f) != 1 || f[0].ID != 0 {
		t.Errorf("failed outcomes %v, want message 0", ids(f))
	}
	close(route.release)
	drain(t, s)
	assertOnce(t, rec, seq(0, 1))
}

// Guarantee: HandleFailed is called only for chunks that have failed
// messages, never with an empty slice.
func TestHandleFailedOnlyForChunksWithFailures(t *testing.T) {
	rec := acker.NewRecorder(false)
	var calls, empty atomic.Int64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		MaxDemand:   1, // one chunk per message
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 3 {
				return 0, errors.New("bad 3")
			}
			return m.Data, nil
		},
		HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
			calls.Add(1)
			if len(failed) == 0 {
				empty.Add(1)
			}
		},
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 10))
	drain(t, s)

	assertOnce(t, rec, seq(0, 10))
	if calls.Load() != 1 || empty.Load() != 0 {
		t.Errorf("HandleFailed called %d times (%d with no message), want once, for message 3's chunk", calls.Load(), empty.Load())
	}
}

// Guarantee: when Prepare fails single messages and then returns an error,
// the messages it failed itself keep their own error; the others of the
// chunk fail with Prepare's error.
func TestPrepareErrorKeepsErrorsPrepareSet(t *testing.T) {
	errOne, errChunk := errors.New("not this one"), errors.New("prepare failed")
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			for _, m := range msgs {
				if m.Data == 1 {
					m.Fail(errOne)
				}
			}
			return errChunk
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
	})
	publish(t, s, ints(rec, 0, 3)) // one chunk
	run(t, s)
	drain(t, s)

	assertOnce(t, rec, seq(0, 3))
	for _, o := range rec.Failed() {
		want := errChunk
		if o.ID == 1 {
			want = errOne
		}
		if !errors.Is(o.Err, want) {
			t.Errorf("message %d failed with %v, want %v", o.ID, o.Err, want)
		}
	}
	if len(rec.Failed()) != 3 {
		t.Errorf("failed outcomes %v, want the whole chunk", ids(rec.Failed()))
	}
}
