package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a source's Run that ends its goroutine (runtime.Goexit, as
// t.FailNow does in a test's fake source) after delivering is a failed
// run: the messages it delivered get one outcome each, the stage restarts
// the source, and Stop drains and returns nil by its deadline.
func TestSourceRunGoexitIsRestartedAndItsMessagesGetOneOutcome(t *testing.T) {
	rec := acker.NewRecorder(false)
	const n = 5
	src := &countingSource{run: func(ctx context.Context, st *producer.Stage[uint64], call int) error {
		feed := st.NewFeed("exits", nil)
		if call == 1 {
			for i := range uint64(n) {
				if _, err := feed.Acquire(ctx, 1); err != nil {
					return nil
				}
				feed.Deliver(message.New(i, rec, i))
			}
			runtime.Goexit()
		}
		<-ctx.Done()
		return nil
	}}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:            "exits",
		Logger:          slog.New(slog.DiscardHandler),
		ShutdownTimeout: 5 * time.Second,
		Producer: producer.Options[uint64]{Source: src,
			Restart: producer.Restart{Backoff: time.Millisecond}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	ctx := ctxT(t, 30*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rec.Wait(wctx, n); err != nil {
		t.Fatalf("%d outcomes, want %d: %v", rec.Total(), n, err)
	}
	wait.For(t, "the exited run to be restarted", func() bool { return src.calls() >= 2 })
	if got := src.calls(); got != 2 {
		t.Fatalf("Run called %d times, want 2 (the exited run is restarted once)", got)
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := p.Stop(sctx); err != nil {
		t.Errorf("Stop = %v, want nil", err)
	}
	assertExactlyOnce(t, rec, n)
	if st := p.SourceStatus()[0]; st.Restarts != 1 || !errors.Is(st.LastError, message.ErrHandlerExited) {
		t.Errorf("source status %+v, want 1 restart with a last error wrapping message.ErrHandlerExited", st)
	}
}

// Guarantee: a source's Close that panics or ends its goroutine
// (runtime.Goexit) is a failed Close: Stop returns by its deadline with an
// error wrapping the *message.PanicError or the *producer.ExitError, the
// pipeline's Done closes, and one error line, with the stack, is logged.
func TestSourceClosePanicOrGoexitIsAFailedClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func()
		is    func(error) bool
	}{
		{"panic", func() { panic("close broke") }, func(err error) bool {
			var pe *message.PanicError
			return errors.As(err, &pe) && strings.Contains(err.Error(), "close broke")
		}},
		{"goexit", runtime.Goexit, func(err error) bool {
			var ee *producer.ExitError
			return errors.As(err, &ee) && ee.Method == "Close" && errors.Is(err, message.ErrHandlerExited)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := &logtest.Lines{}
			src := &countingSource{close: tc.close, run: func(ctx context.Context, _ *producer.Stage[uint64], _ int) error {
				<-ctx.Done()
				return nil
			}}
			p := mustNew(t, pipeline.Options[uint64, uint64]{
				Name:            "closes",
				Logger:          slog.New(slog.NewTextHandler(lines, nil)),
				ShutdownTimeout: 5 * time.Second,
				Producer:        producer.Options[uint64]{Source: src},
				Processors:      processor.Options[uint64, uint64]{Handle: identity},
			})
			ctx := ctxT(t, 30*time.Second)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			err := p.Stop(sctx)
			if !tc.is(err) {
				t.Errorf("Stop = %v, want the failed Close", err)
			}
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the pipeline's Done has not closed 10s after Stop returned")
			}
			logged := lines.Matching("closing the source failed")
			if len(logged) != 1 || !strings.Contains(logged[0], "stack=") {
				t.Errorf("log lines %q, want one with the stack", logged)
			}
		})
	}
}

// countingSource runs run, numbering its calls from 1, and calls close, when
// set, from Close.
type countingSource struct {
	run   func(ctx context.Context, st *producer.Stage[uint64], call int) error
	close func()
	n     atomic.Int32
}

func (s *countingSource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	return s.run(ctx, st, int(s.n.Add(1)))
}

func (s *countingSource) Info() (producer.Info, error) { return producer.Info{}, nil }

func (s *countingSource) Close(context.Context) error {
	if s.close != nil {
		s.close()
	}
	return nil
}

func (s *countingSource) calls() int { return int(s.n.Load()) }

// Guarantee: a processors' PartitionBy that ends its goroutine
// (runtime.Goexit) on the producer stage's dispatcher (a rate-limited
// stage hands every delivery over from there) does not stop the stage
// from dispatching: the messages delivered afterwards are handled, one
// error line is logged, and Stop returns nil.
func TestPartitionByGoexitOnTheDispatcherLeavesTheStageDispatching(t *testing.T) {
	rec := acker.NewRecorder(false)
	second := make(chan struct{})
	var exited atomic.Bool
	src := producer.SourceFunc[uint64](func(ctx context.Context, st *producer.Stage[uint64]) error {
		feed := st.NewFeed("exits", nil)
		deliver := func(from, to uint64) {
			for i := from; i < to; i++ {
				if _, err := feed.Acquire(ctx, 1); err != nil {
					return
				}
				feed.Deliver(message.New(i, rec, i))
			}
		}
		deliver(0, 10)
		select {
		case <-second:
		case <-ctx.Done():
			return nil
		}
		deliver(100, 110)
		<-ctx.Done()
		return nil
	})
	lines := &logtest.Lines{}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:            "exits",
		Logger:          slog.New(slog.NewTextHandler(lines, nil)),
		ShutdownTimeout: 5 * time.Second,
		Producer: producer.Options[uint64]{Source: src,
			RateLimit: &producer.RateLimit{Allowed: 1 << 20, Interval: time.Second}},
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity,
			PartitionBy: func(m *message.Message[uint64]) string {
				if m.Data == 7 && exited.CompareAndSwap(false, true) {
					runtime.Goexit()
				}
				return "k"
			}},
	})
	ctx := ctxT(t, 30*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "PartitionBy to end its goroutine", exited.Load)
	close(second)
	stopOnceHandledAfterExit(t, ctx, p, rec)
	if got := lines.Matching("dispatching goroutine (runtime.Goexit)"); len(got) != 1 || !strings.Contains(got[0], "PartitionBy") {
		t.Errorf("exit log lines %q, want one naming PartitionBy", got)
	}
}

// exitOnceAcker forwards every call to rec but the first one that
// reports message 7, which ends its goroutine (runtime.Goexit) instead.
type exitOnceAcker struct {
	rec    *acker.Recorder
	exited atomic.Bool
	lost   sync.Map // the ids of the exited call's outcomes
	nlost  atomic.Int32
}

func (a *exitOnceAcker) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	for _, os := range [][]acker.Outcome{successful, failed} {
		for _, o := range os {
			if o.ID == 7 && a.exited.CompareAndSwap(false, true) {
				for _, os := range [][]acker.Outcome{successful, failed} {
					for _, o := range os {
						a.lost.Store(o.ID, true)
						a.nlost.Add(1)
					}
				}
				runtime.Goexit()
			}
		}
	}
	a.rec.Ack(ctx, successful, failed)
}

// Guarantee: a source's acknowledger that ends its goroutine
// (runtime.Goexit) when the processors or a batch processor report
// outcomes to it leaves the pipeline running: that call's outcomes stay
// unreported (the acknowledger was given them and did not return), every other message reaches the acknowledger exactly once,
// one error line is logged, and Stop returns nil by its deadline.
func TestSourceAcknowledgerGoexitLeavesThePipelineRunning(t *testing.T) {
	for _, withBatcher := range []bool{false, true} {
		name := "processors"
		if withBatcher {
			name = "batcher"
		}
		t.Run(name, func(t *testing.T) {
			rec := acker.NewRecorder(false)
			ack := &exitOnceAcker{rec: rec}
			const n = 100
			src := producer.SourceFunc[uint64](func(ctx context.Context, st *producer.Stage[uint64]) error {
				feed := st.NewFeed("f", nil)
				for i := range uint64(n) {
					if _, err := feed.Acquire(ctx, 1); err != nil {
						return nil
					}
					feed.Deliver(message.New(i, ack, i))
				}
				<-ctx.Done()
				return nil
			})
			lines := &logtest.Lines{}
			o := pipeline.Options[uint64, uint64]{
				Name:            "acks",
				Logger:          slog.New(slog.NewTextHandler(lines, nil)),
				ShutdownTimeout: 5 * time.Second,
				Producer:        producer.Options[uint64]{Source: src},
				Processors:      processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity},
			}
			if withBatcher {
				o.Batchers = []batcher.Options[uint64]{{Name: message.DefaultBatcher, Concurrency: 1,
					BatchSize: 1, BatchTimeout: time.Millisecond, Handle: batchOK}}
			}
			p := mustNew(t, o)
			ctx := ctxT(t, 30*time.Second)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			wait.For(t, "every outcome but those of the exited call", func() bool {
				return ack.exited.Load() && rec.Total() == n-int(ack.nlost.Load())
			})
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			if err := p.Stop(sctx); err != nil {
				t.Errorf("Stop = %v, want nil", err)
			}
			for i := range uint64(n) {
				want := 1
				if _, lost := ack.lost.Load(i); lost {
					want = 0 // its call ended its goroutine
				}
				if c := rec.Count(i); c != want {
					t.Errorf("message %d reported %d times, want %d", i, c, want)
				}
			}
			if got := lines.Matching("(runtime.Goexit)"); len(got) != 1 || !strings.Contains(got[0], "stack=") {
				t.Errorf("exit log lines %q, want one with the stack", got)
			}
		})
	}
}
