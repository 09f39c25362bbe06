package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// misbehavingHolds refuses the first Hold with refusal, as a broker that
// refuses the hold topic (or a full hold queue) would; the next Hold
// panics and the one after ends its goroutine (runtime.Goexit, as
// t.FailNow does); later ones reach the backend.
type misbehavingHolds struct {
	topology.Queues[int]
	refusal error
	calls   *atomic.Int64
}

func (q misbehavingHolds) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	switch q.calls.Add(1) {
	case 1:
		return q.refusal
	case 2:
		panic("hold backend broke")
	case 3:
		runtime.Goexit()
	}
	return q.Queues.Hold(ctx, i, l)
}

// Guarantee: the source's own attempts to hand a refused retry off again
// (with backoff, whether the backend refused it or a full queue did)
// survive a backend whose Hold panics or ends the goroutine: each counts
// as a failed attempt, logged at error level (the exit with its stack),
// the retry is tried again, and its key moves on once the backend takes
// it, instead of the process crashing or the key (or, for a full queue,
// the whole source) stalling until the consumer stops.
func TestAHandOffThatPanicsOrExitsIsTriedAgain(t *testing.T) {
	for _, refusal := range []error{errors.New("hold topic unavailable"), fmt.Errorf("hold queue: %w", topology.ErrFull)} {
		t.Run(refusal.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log logtest.Records
				_, mq := declareLedger(t)
				calls := new(atomic.Int64)
				q := misbehavingHolds{Queues: mq, refusal: refusal, calls: calls}
				var handled atomic.Int64
				var order []int
				_, p := startLoggingPipeline(t, q, slog.New(&log), func(_ context.Context, m *message.Message[int]) (int, error) {
					order = append(order, m.Data) // one processor: one at a time
					if handled.Add(1) == 1 {
						return 0, topology.Retry(errors.New("gateway down"))
					}
					return m.Data, nil
				})
				publishOneTwoToKeyA(t, mq)
				time.Sleep(time.Minute) // fake time: the backoffs and the hold's second
				synctest.Wait()
				if n := calls.Load(); n != 4 {
					t.Fatalf("Hold called %d times, want 4: refused, panicked, exited, taken", n)
				}
				if got := handled.Load(); got != 3 || !slices.Equal(order, []int{1, 1, 2}) {
					t.Fatalf("handled %v, want [1 1 2]: the retry comes back and its key moves on", order)
				}
				if got := log.Count(slog.LevelError, "a hand-off to the backend ended its goroutine (runtime.Goexit); the letter is tried again"); got != 1 {
					t.Fatalf("%d ERROR lines for the exit, want 1", got)
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// panickySettles refuses the first Hold, as a broker that refuses the hold
// topic would, and its readers' Settle and Close panic once a Hold went
// through.
type panickySettles struct {
	topology.Queues[int]
	holds *atomic.Int64
}

func (q panickySettles) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	if q.holds.Add(1) == 1 {
		return errors.New("hold topic unavailable")
	}
	return q.Queues.Hold(ctx, i, l)
}

func (q panickySettles) Subscribe(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return panickySettleReader{Reader: r, holds: q.holds}, nil
}

type panickySettleReader struct {
	topology.Reader[int]
	holds *atomic.Int64
}

// Close closes the reader, then panics once a Hold went through.
func (r panickySettleReader) Close(ctx context.Context) error {
	err := r.Reader.Close(ctx)
	if r.holds.Load() > 1 {
		panic("close backend broke")
	}
	return err
}

func (r panickySettleReader) Settle(ctx context.Context, l *topology.Letter[int]) error {
	if r.holds.Load() > 1 {
		panic("settle backend broke")
	}
	return r.Reader.Settle(ctx, l)
}

// Guarantee: a reader whose Settle panics costs a settle failure, counted
// and logged as one that returns an error is, whichever goroutine
// settles: the source's own attempt at a refused hand-off (on a timer's
// goroutine) or a message's acknowledgement. The process goes on, and so
// does the key. A reader whose Close panics, on the goroutine the
// source's Close closes it on, fails that Close with the panic as an
// error.
func TestAReaderWhoseSettleOrClosePanicsFailsThatCallOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log logtest.Records
		_, mq := declareLedger(t)
		q := panickySettles{Queues: mq, holds: new(atomic.Int64)}
		src, p := retryTheFirstOfKeyA(t, q, mq, slog.New(&log))
		if st := src.Stats(); st.SettleFailed != 3 {
			t.Fatalf("stats %+v, want 3 settle failures: the letter handed off, the retry and 2", st)
		}
		if got := log.Count(slog.LevelWarn, "could not settle a letter"); got == 0 {
			t.Fatal("no WARN line for the settle failures")
		}
		// Stopping closes the source, which closes the reader, whose
		// Close panics, on a goroutine of the source's own.
		var pe *message.PanicError
		if err := p.Stop(context.Background()); !errors.As(err, &pe) || pe.Value != "close backend broke" {
			t.Fatalf("Stop = %v, want an error wrapping the *message.PanicError of the reader's Close", err)
		}
	})
}

// exitingSettles refuses the first Hold with refusal, as a broker that
// refuses the hold topic (or a full hold queue) would; its readers' first
// Settle once a Hold went through (the source's own settling of the
// letter it handed off, on a timer's goroutine) ends its goroutine
// (runtime.Goexit, as t.FailNow does).
type exitingSettles struct {
	topology.Queues[int]
	refusal error
	holds   *atomic.Int64
	exited  *atomic.Bool
}

func (q exitingSettles) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	if q.holds.Add(1) == 1 {
		return q.refusal
	}
	return q.Queues.Hold(ctx, i, l)
}

func (q exitingSettles) Subscribe(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return exitingSettleReader{Reader: r, q: q}, nil
}

type exitingSettleReader struct {
	topology.Reader[int]
	q exitingSettles
}

func (r exitingSettleReader) Settle(ctx context.Context, l *topology.Letter[int]) error {
	if r.q.holds.Load() > 1 && r.q.exited.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
	return r.Reader.Settle(ctx, l)
}

// Guarantee: a reader whose Settle ends its goroutine (runtime.Goexit)
// when the source settles a letter it handed off itself, on a timer's
// goroutine (a refused retry, whether the backend refused it or a full
// queue did), costs a settle failure, counted and logged at error level
// with the stack: the timer's goroutine alone ends, and the source goes on
// (for a full queue, the letters kept are let go and new ones taken)
// instead of stalling until the consumer stops.
func TestASettleThatExitsOnTheSourcesOwnHandOffIsASettleFailure(t *testing.T) {
	for _, refusal := range []error{errors.New("hold topic unavailable"), fmt.Errorf("hold queue: %w", topology.ErrFull)} {
		t.Run(refusal.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log logtest.Records
				_, mq := declareLedger(t)
				q := exitingSettles{Queues: mq, refusal: refusal, holds: new(atomic.Int64), exited: new(atomic.Bool)}
				src, p := retryTheFirstOfKeyA(t, q, mq, slog.New(&log))
				if !q.exited.Load() {
					t.Fatal("no Settle ended its goroutine")
				}
				if st := src.Stats(); st.SettleFailed != 1 || st.Refused != 0 {
					t.Fatalf("stats %+v, want 1 settle failure (the letter handed off) and no letter kept", st)
				}
				if got := log.Count(slog.LevelError, "a settle ended its goroutine (runtime.Goexit); the letter counts as not settled"); got != 1 {
					t.Fatalf("%d ERROR lines for the exit, want 1", got)
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// retryTheFirstOfKeyA starts a pipeline reading q (over mq) whose handler
// retries the first message it handles, publishes 1 and 2 to key "A" on
// mq, lets a minute of fake time pass (the backoffs and the hold's
// second), and fails t unless the retry came back and its key moved on.
func retryTheFirstOfKeyA(t *testing.T, q, mq topology.Queues[int], log *slog.Logger) (*topology.Source[int], *pipeline.Pipeline[int, int]) {
	t.Helper()
	var order []int
	src, p := startLoggingPipeline(t, q, log, func(_ context.Context, m *message.Message[int]) (int, error) {
		order = append(order, m.Data) // one processor: one at a time
		if len(order) == 1 {
			return 0, topology.Retry(errors.New("gateway down"))
		}
		return m.Data, nil
	})
	publishOneTwoToKeyA(t, mq)
	time.Sleep(time.Minute) // fake time: the backoff and the hold's second
	synctest.Wait()
	if !slices.Equal(order, []int{1, 1, 2}) {
		t.Fatalf("handled %v, want [1 1 2]: the retry comes back and its key moves on", order)
	}
	return src, p
}
