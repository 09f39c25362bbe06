package batching_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// partitionExitRun runs a batcher of one partition and one batch
// processor, batches of 5 and no timeout, whose user code on the
// partition's goroutine ends it (runtime.Goexit) once: it publishes the
// messages first(rec) returns, waits for the outcomes of those whose
// acknowledger is rec, publishes 10
// more and waits for theirs, then drains the batcher. It checks that the
// partition still runs after the exit, that every message reaches its
// acknowledger once, that those failed are wantFailed, with
// message.ErrHandlerExited, and that the exit is logged once, at error
// level, with the stack of the goroutine that exited.
func partitionExitRun(t *testing.T, opts batcher.Options[int], hooks *telemetry.Hooks,
	first func(rec acker.Acknowledger) []*message.Message[int], wantFailed []int) {
	t.Helper()
	log := &logtest.Lines{}
	opts.Name, opts.Concurrency, opts.BatchTimeout = "test", 1, never
	if opts.BatchSize == 0 {
		opts.BatchSize = 5
	}
	s := batching.New(opts.WithDefaults(), batching.Config{Name: t.Name(), Logger: slog.New(slog.NewTextHandler(log, nil)), Hooks: hooks})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := stagetest.Go(ctx, s)
	rec := acker.NewRecorder(false)
	send := func(msgs []*message.Message[int], want int) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, patience)
		defer pcancel()
		if k, err := s.Publish(pctx, msgs); err != nil || k != len(msgs) {
			t.Fatalf("Publish took %d of %d messages: %v", k, len(msgs), err)
		}
		if err := rec.Wait(pctx, want); err != nil {
			t.Fatalf("%d outcomes recorded, want %d: %v", rec.Total(), want, err)
		}
	}
	ms := first(rec)
	var want []int
	for _, m := range ms {
		if a, _, _ := m.Acknowledger(); a == acker.Acknowledger(rec) {
			want = append(want, m.Data)
		}
	}
	send(ms, len(want))
	if parts, _ := s.Running(); len(parts) != 1 {
		t.Errorf("batcher partitions running after the exit: %v, want the one configured", parts)
	}
	send(msgs(rec, 100, 10, "k"), len(want)+10)
	s.CloseInput()
	waitDone(t, done, "the batcher to return")
	assertOnce(t, rec, append(want, span(100, 110)...))
	failed := outcomeIDs(rec.Failed())
	if len(failed) != len(wantFailed) {
		t.Errorf("messages failed: %v, want %v", failed, wantFailed)
	}
	var pe *message.PanicError
	for i, o := range rec.Failed() {
		if i < len(wantFailed) && o.ID != uint64(wantFailed[i]) || !errors.Is(o.Err, message.ErrHandlerExited) && !errors.As(o.Err, &pe) {
			t.Errorf("message %d failed with %v; want only %v, with message.ErrHandlerExited (or the panic of a Weight)", o.ID, o.Err, wantFailed)
		}
	}
	lines := log.Matching(batching.PartitionExitedLog)
	if len(lines) != 1 {
		t.Fatalf("%d log lines %q, want 1", len(lines), batching.PartitionExitedLog)
	}
	if !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "partition_goexit_test.go") {
		t.Errorf("the exit's log line is not an error with the stack of the exit (in this file): %s", lines[0])
	}
}

// Guarantee: a Weight function that ends the batcher partition's
// goroutine (runtime.Goexit, as t.FailNow does) fails that message with
// message.ErrHandlerExited, acknowledged at once as when Weight panics;
// the partition goes on in another goroutine with the rest of its chunk,
// the batches it held and the outcomes it had not reported yet (here of
// a message of the same chunk whose Weight panicked before), so that
// every other message is batched and acknowledged once, and the batcher
// drains.
func TestWeightGoexitFailsThatMessageAndThePartitionGoesOn(t *testing.T) {
	var exited atomic.Bool
	partitionExitRun(t, batcher.Options[int]{
		MaxWeight: 1000,
		Weight: func(m *message.Message[int]) int {
			if m.Data == 1 {
				panic("weight")
			}
			if m.Data == 3 && exited.CompareAndSwap(false, true) {
				runtime.Goexit()
			}
			return 1
		},
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
	}, nil, func(rec acker.Acknowledger) []*message.Message[int] { return msgs(rec, 0, 22, "k") }, []int{1, 3})
}

// Guarantee: a BatchEmit hook that ends the batcher partition's goroutine
// leaves the batch it observed emitted, and the partition goes on with
// the rest of its chunk: no message is lost or failed.
func TestBatchEmitHookGoexitLeavesTheBatchEmittedAndThePartitionGoesOn(t *testing.T) {
	exit := stagetest.GoexitOnce()
	hooks := &telemetry.Hooks{BatchEmit: func(context.Context, telemetry.Batch) { exit() }}
	partitionExitRun(t, batcher.Options[int]{
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
	}, hooks, func(rec acker.Acknowledger) []*message.Message[int] { return msgs(rec, 0, 20, "k") }, nil)
}

// Guarantee: when the batch a message's weight cuts short is emitted and
// the BatchEmit hook then ends the goroutine, the message is in the next
// batch, and that batch is emitted as soon as it is due (here it reaches
// MaxWeight at once), not left to wait for a timeout.
func TestBatchEmitHookGoexitOnAWeightCutStillEmitsTheNextBatchWhenDue(t *testing.T) {
	exit := stagetest.GoexitOnce()
	hooks := &telemetry.Hooks{BatchEmit: func(context.Context, telemetry.Batch) { exit() }}
	partitionExitRun(t, batcher.Options[int]{
		BatchSize: 100,
		MaxWeight: 5,
		Weight: func(m *message.Message[int]) int {
			if m.Data == 2 || m.Data >= 100 {
				return 5
			}
			return 1
		},
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
	}, hooks, func(rec acker.Acknowledger) []*message.Message[int] { return msgs(rec, 0, 3, "k") }, nil)
}

// exitingAcker ends the goroutine that reports to it.
type exitingAcker struct{}

func (exitingAcker) Ack(context.Context, []acker.Outcome, []acker.Outcome) { runtime.Goexit() }

// Guarantee: an acknowledger that ends the batcher partition's goroutine
// while the partition reports a message that failed on its way in (here
// its Weight panicked) leaves that outcome unreported, as documented, and
// the partition goes on: the other messages are batched and acknowledged
// once, and the batcher drains.
func TestAcknowledgerGoexitInAPartitionLeavesThePartitionRunning(t *testing.T) {
	partitionExitRun(t, batcher.Options[int]{
		MaxWeight: 1000,
		Weight: func(m *message.Message[int]) int {
			if m.Data == 3 {
				panic("weight")
			}
			return 1
		},
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
	}, nil, func(rec acker.Acknowledger) []*message.Message[int] {
		ms := msgs(rec, 0, 21, "k")
		ms[3] = msg(exitingAcker{}, 3, "k")
		return ms
	}, nil)
}
