package processing_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// discardAll is a failure hook that tries to discard every failed message.
func discardAll[T any](hooked *[]uint64) func(context.Context, []*message.Message[T]) {
	return func(_ context.Context, failed []*message.Message[T]) {
		for _, m := range failed {
			_, id, _ := m.Acknowledger()
			*hooked = append(*hooked, id)
			m.SetDisposition(acker.DispositionDiscard)
		}
	}
}

// assertInterrupted fails unless o is a failure the shutdown caused: its
// error wraps ErrShutdown and context.Canceled, and it asks for a retry.
func assertInterrupted(t *testing.T, o acker.Outcome) {
	t.Helper()
	if !acker.Interrupted(o) || !errors.Is(o.Err, context.Canceled) || o.Disposition != acker.DispositionRetry {
		t.Fatalf("outcome %d: error %v disposition %v; want ErrShutdown wrapping context.Canceled, retry", o.ID, o.Err, o.Disposition)
	}
}

// Guarantee: a handler that fails with its context's error once the hard
// stop cancelled it yields an interrupted outcome (ErrShutdown, retry), after
// the failure hook ran and whatever the hook set.
func TestHandlerCancelledByHardStopIsRetried(t *testing.T) {
	rec := acker.NewRecorder(false)
	inHandler := make(chan struct{})
	var hooked []uint64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1, MaxDemand: 1,
		Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			close(inHandler)
			<-ctx.Done()
			return 0, fmt.Errorf("write: %w", ctx.Err())
		},
		HandleFailed: discardAll[int](&hooked),
	})
	cancel := run(t, s)
	publish(t, s, ints(rec, 1, 1))
	waitDone(t, inHandler, "the handler to start")
	cancel()
	waitAcks(t, rec, 1)
	if len(rec.Failed()) != 1 || !slices.Equal(hooked, []uint64{1}) {
		t.Fatalf("failed %v, hook saw %v; want message 1 failed and seen by the hook", rec.Failed(), hooked)
	}
	assertInterrupted(t, rec.Failed()[0])
}

// Guarantee: a handler's own context error while the stage runs is an
// ordinary failure: the hook's disposition applies and it does not wrap
// ErrShutdown.
func TestHandlerOwnDeadlineIsOrdinaryFailure(t *testing.T) {
	rec := acker.NewRecorder(false)
	var hooked []uint64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			own, cancel := context.WithTimeout(ctx, time.Nanosecond)
			defer cancel()
			<-own.Done()
			return 0, own.Err()
		},
		HandleFailed: discardAll[int](&hooked),
	})
	run(t, s)
	publish(t, s, ints(rec, 1, 1))
	waitAcks(t, rec, 1)
	drain(t, s)
	o := rec.Failed()[0]
	if acker.Interrupted(o) || !errors.Is(o.Err, context.DeadlineExceeded) || o.Disposition != acker.DispositionDiscard {
		t.Fatalf("outcome error %v disposition %v; want an ordinary DeadlineExceeded, discarded by the hook", o.Err, o.Disposition)
	}
}

// Guarantee: a Prepare that fails with its context's error once the hard
// stop cancelled it fails the chunk as interrupted (retry), whatever the
// hook sets, and no handler sees those messages.
func TestPrepareCancelledByHardStopIsRetried(t *testing.T) {
	rec := acker.NewRecorder(false)
	inPrepare := make(chan struct{})
	var hooked []uint64
	handled := 0
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1, MaxDemand: 3,
		Prepare: func(ctx context.Context, msgs []*message.Message[int]) error {
			if len(msgs) != 3 {
				return nil
			}
			close(inPrepare)
			<-ctx.Done()
			return ctx.Err()
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled++
			return m.Data, nil
		},
		HandleFailed: discardAll[int](&hooked),
	})
	cancel := run(t, s)
	publish(t, s, ints(rec, 1, 3))
	waitDone(t, inPrepare, "Prepare to start")
	cancel()
	waitAcks(t, rec, 3)
	waitDone(t, stagetest.Done(s), "the processors to return")
	if handled != 0 || len(hooked) != 3 || len(rec.Failed()) != 3 {
		t.Fatalf("handled %d, hook saw %v, %d failed; want none handled, all 3 failed and hooked", handled, hooked, len(rec.Failed()))
	}
	for _, o := range rec.Failed() {
		assertInterrupted(t, o)
	}
}

// Guarantee: once the hard stop cut the drain short, a processor does not
// call the handler on the rest of its chunk and leaves those messages
// unacknowledged; a message its handler did handle is still reported.
// Running names the processor until it returns.
func TestHardStopLeavesRestOfChunkUnacked(t *testing.T) {
	rec := acker.NewRecorder(false)
	inHandler := make(chan struct{})
	release := make(chan struct{})
	var seen []int
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1, MaxDemand: 3,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			seen = append(seen, m.Data)
			if m.Data == 1 {
				close(inHandler)
				<-release // ignores its context
			}
			return m.Data, nil
		},
	})
	cancel := run(t, s)
	publish(t, s, ints(rec, 1, 3))
	waitDone(t, inHandler, "the handler to start")
	if got := s.Running(); !slices.Equal(got, []int{0}) {
		t.Fatalf("Running() = %v while the handler is stuck, want [0]", got)
	}
	cancel()
	close(release)
	waitDone(t, stagetest.Done(s), "the processors to return")
	if got := s.Running(); len(got) != 0 {
		t.Fatalf("Running() = %v after every processor returned, want none", got)
	}
	if !slices.Equal(seen, []int{1}) {
		t.Fatalf("handler saw %v, want only the message it was handling at the hard stop", seen)
	}
	if rec.Total() != 1 || len(rec.Successful()) != 1 || rec.Successful()[0].ID != 1 {
		t.Fatalf("outcomes: %d successful %v, %d failed; want message 1 only, successful", len(rec.Successful()), ids(rec.Successful()), rec.FailedCount())
	}
}

// Guarantee: a nil message in a chunk is dropped, never handed to the
// handler (which would crash the process); the other messages are handled.
func TestNilMessageDropped(t *testing.T) {
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[int, int]{Concurrency: 1, MaxDemand: 4, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
		return m.Data, nil
	}})
	run(t, s)
	msgs := ints(rec, 1, 2)
	publish(t, s, []*message.Message[int]{nil, msgs[0], nil, msgs[1]})
	drain(t, s)
	assertOnce(t, rec, seq(1, 3))
}

// Guarantee: once the processors have returned after a hard stop (their
// context cancelled, the input never closed), a late Publish fails with
// queue.ErrClosed rather than queue a message that nobody handles or
// counts.
func TestPublishAfterHardStopFails(t *testing.T) {
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[int, int]{Concurrency: 2,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := stagetest.Go(ctx, s)
	cancel()
	waitDone(t, done, "the processors to return")
	n, err := s.Publish(context.Background(), ints(rec, 0, 1))
	if n != 0 || !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Publish after a hard stop took %d: %v, want 0 and queue.ErrClosed", n, err)
	}
}
