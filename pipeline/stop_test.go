package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a pipeline stopped before it was started refuses Push and Test
// with ErrStopped; it never takes messages it will not handle.
func TestPushAfterStopBeforeStart(t *testing.T) {
	p := pushOnly(t)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := acker.NewRecorder(false)
	if err := p.Push(context.Background(), message.New[uint64](1, rec, 1)); !errors.Is(err, pipeline.ErrStopped) {
		t.Fatalf("Push after Stop before Start = %v, want ErrStopped", err)
	}
	if _, err := p.Test(ctxT(t, 10*time.Second), 2); !errors.Is(err, pipeline.ErrStopped) {
		t.Fatalf("Test after Stop before Start = %v, want ErrStopped", err)
	}
}

// Guarantee: when one producer stage gives up on its source, the whole
// pipeline stops by itself (the other stages' sources are stopped too), Run
// returns the *producer.RestartError, and what the healthy stage delivered is
// drained.
func TestGiveUpStopsEveryStage(t *testing.T) {
	errBroker := errors.New("broker unreachable")
	rec := acker.NewRecorder(false)
	src := &gridSource{feeds: 1, perFeed: 0, ack: rec, fail: func(stage int) error {
		if stage == 0 {
			return errBroker
		}
		return nil // stage 1 delivers until it is told to stop
	}}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "give-up",
		Producer: producer.Options[uint64]{Source: src, Concurrency: 2, Restart: producer.Restart{
			MaxRestarts: 1, Window: time.Minute, Backoff: time.Millisecond,
		}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	ctx := ctxT(t, 5*time.Second)
	err := p.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run returned only when its context ended (%v): the give-up did not stop the pipeline", err)
	}
	var re *producer.RestartError
	if !errors.As(err, &re) || !errors.Is(err, errBroker) || re.Stage != "give-up.producer.0" {
		t.Fatalf("Run = %v, want the *producer.RestartError of stage 0", err)
	}
	assertExactlyOnce(t, rec, src.records()["s1-f0"].delivered)
}

// Guarantee: Test reports ErrDuplicateAck when a message is acknowledged more
// than once, with the outcome showing how often.
func TestTestHelperReportsDuplicateAck(t *testing.T) {
	p := mustNew(t, pipeline.Options[int, int]{
		Name: "twice",
		Processors: processor.Options[int, int]{
			Concurrency: 1,
			Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
				if m.Data == 2 {
					// A buggy handler that acknowledges on its own: the
					// processor acknowledges the message again.
					a, _, _ := m.Acknowledger()
					a.Ack(ctx, []acker.Outcome{m.Outcome()}, nil)
				}
				return m.Data, nil
			},
		},
	})
	ctx := ctxT(t, 10*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	res, err := p.Test(ctx, 1, 2, 3)
	if !errors.Is(err, pipeline.ErrDuplicateAck) {
		t.Fatalf("Test = %v, want ErrDuplicateAck", err)
	}
	if len(res) != 3 || res[0].Acks != 1 || res[1].Acks != 2 || res[2].Acks != 1 {
		t.Fatalf("outcomes %+v, want message 2 acknowledged twice, the others once", res)
	}
}

// Guarantee: a drain cut short both by ShutdownTimeout and by Stop's context
// reports ErrShutdownTimeout once, not once per cause, and Err, which has
// that one error to report, returns ErrShutdownTimeout itself.
func TestShutdownTimeoutReportedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock() // so that nothing is left blocked if the test fails
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "stuck",
			ShutdownTimeout: 50 * time.Millisecond,
			Processors:      processor.Options[uint64, uint64]{Concurrency: 1, Handle: stuckHandler(started, release)},
		})
		startWithOne(t, p, started)
		// Both the shutdown timeout and Stop's context end the drain at
		// 50ms; the handler, which ignores its context, is let go only
		// once Stop has returned.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := p.Stop(ctx)
		if !errors.Is(err, pipeline.ErrShutdownTimeout) || strings.Count(err.Error(), pipeline.ErrShutdownTimeout.Error()) != 1 {
			t.Fatalf("Stop = %q, want ErrShutdownTimeout reported once", err)
		}
		unblock()
		<-p.Done()
		// One cause is returned as it is, not joined with nothing.
		if err := p.Err(); err != pipeline.ErrShutdownTimeout {
			t.Fatalf("Err = %#v, want ErrShutdownTimeout itself", err)
		}
	})
}

// Guarantee: the source is closed once, only after every outcome has been
// delivered to its acknowledgers.
func TestSourceClosedAfterEveryOutcome(t *testing.T) {
	rec := acker.NewRecorder(false)
	src := &countingCloser{gridSource: gridSource{feeds: 2, perFeed: 0, ack: rec}, rec: rec}
	src.atClose.Store(-1)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "close-last",
		Producer:   producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
		// Everything waits in an open batch until the drain flushes it.
		Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 1_000_000, BatchTimeout: time.Hour, Handle: batchOK}},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "every message delivered", func() bool {
		n := 0
		for _, r := range src.records() {
			n += r.delivered
		}
		return n > 100
	})
	if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	delivered := 0
	for _, r := range src.records() {
		delivered += r.delivered
	}
	assertExactlyOnce(t, rec, delivered)
	if n, at := src.closes.Load(), src.atClose.Load(); n != 1 || at != int64(delivered) {
		t.Fatalf("source closed %d times, with %d of %d outcomes delivered; want once, after all of them", n, at, delivered)
	}
}

// countingCloser is a gridSource that records, when it is closed, how many
// outcomes its acknowledger had received.
type countingCloser struct {
	gridSource
	rec     *acker.Recorder
	closes  atomic.Int32
	atClose atomic.Int64
}

func (s *countingCloser) Close(context.Context) error {
	s.closes.Add(1)
	s.atClose.Store(int64(s.rec.Total()))
	return nil
}

// Guarantee: once a Stop cut the drain short, Push refuses messages with
// ErrStopped, even while a source whose Run ignores its context keeps the
// producer stage from returning: a pushed message is either handled or
// refused, never taken and forgotten.
func TestPushAfterCutShortStopIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, unblock := startWithStuckSource(t, "push-after-stop", 1)
		rec := acker.NewRecorder(false)
		stopCutShort(t, p)
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		defer pcancel()
		pushErr := p.Push(pctx, message.New[uint64](1, rec, 1))
		unblock()
		<-p.Done()
		if !errors.Is(pushErr, pipeline.ErrStopped) {
			t.Fatalf("Push after the cut-short Stop = %v (%d outcomes), want ErrStopped", pushErr, rec.Total())
		}
	})
}

// Guarantee: concurrent Stops, each with its own deadline (or none), each
// return by their own deadline while a handler ignores its context; the
// earliest deadline cuts the drain short for all of them, and those
// without one return once the pipeline gives up on the handler.
func TestConcurrentStopsReturnByTheirOwnDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release, unblock := stuckGate()
		defer unblock() // so that nothing is left blocked if the test fails
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "stops",
			ShutdownTimeout: time.Minute,
			Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: stuckHandler(started, release)},
		})
		startWithOne(t, p, started)
		// The first deadline cuts the drain short at 150ms (CancelGrace
		// capped to a quarter of the time left); the pipeline gives up
		// on the handler CancelGrace later.
		giveUp := 150*time.Millisecond + pipeline.CancelGrace
		deadlines := []time.Duration{200 * time.Millisecond, 600 * time.Millisecond, time.Hour, 0}
		errs := make([]error, len(deadlines))
		var wg sync.WaitGroup
		for i, deadline := range deadlines {
			wg.Go(func() {
				ctx := context.Background()
				want := giveUp
				if deadline > 0 {
					c, cancel := context.WithTimeout(ctx, deadline)
					defer cancel()
					ctx, want = c, min(deadline, giveUp)
				}
				begin := time.Now()
				errs[i] = p.Stop(ctx)
				if took := time.Since(begin); took > want {
					t.Errorf("Stop with deadline %v returned after %v, want by %v", deadline, took, want)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			assertStraggler(t, err, pipeline.Straggler{Kind: pipeline.KindProcessor, Stage: "stops.processor", Index: 0})
		}
		unblock()
		<-p.Done()
	})
}

// Guarantee: Run and Stop called at the same time both return, and leave
// nothing running: Run returns nil when it started first (Stop drained
// the pipeline), ErrStoppedBeforeStart when Stop came first.
func TestRunAndStopCalledTogetherBothReturn(t *testing.T) {
	for range 20 {
		p := pushOnly(t)
		runErr := make(chan error, 1)
		go func() { runErr <- p.Run(context.Background()) }()
		if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		select {
		case err := <-runErr:
			if err != nil && !errors.Is(err, pipeline.ErrStoppedBeforeStart) {
				t.Fatalf("Run = %v, want nil or ErrStoppedBeforeStart", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after Stop")
		}
		<-p.Done()
	}
}

// Guarantee: once a Stop cut the drain short, Push refuses messages with
// ErrStopped even while both a source whose Run ignores its context and a
// handler that ignores its own keep the stages from returning: the
// processors' queues have room, but no processor will take from them
// again, so a message pushed then would be taken and never handled.
func TestPushAfterCutShortStopIsRefusedWhileAHandlerIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock)
		src := producer.SourceFunc[uint64](func(context.Context, *producer.Stage[uint64]) error {
			<-release // a blocking call that ignores its context
			return nil
		})
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "push-after-stuck-stop",
			ShutdownTimeout: time.Second,
			Producer:        producer.Options[uint64]{Source: src},
			Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				<-release // a handler that ignores its context
				return m.Data, nil
			}},
		})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec := acker.NewRecorder(false)
		if err := p.Push(context.Background(), message.New[uint64](0, rec, 0)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		stopCutShort(t, p)
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		defer pcancel()
		pushErr := p.Push(pctx, message.New[uint64](1, rec, 1), message.New[uint64](2, rec, 2))
		unblock()
		<-p.Done()
		if !errors.Is(pushErr, pipeline.ErrStopped) || !strings.Contains(pushErr.Error(), "0 of 2 messages pushed") {
			t.Fatalf("Push after the cut-short Stop = %v, want ErrStopped saying 0 of 2 messages pushed", pushErr)
		}
		if c := rec.Counts(); c[1] != 0 || c[2] != 0 {
			t.Errorf("the messages pushed after the cut-short Stop were acknowledged: %v", c)
		}
	})
}

// Guarantee: Stop on a pipeline that has stopped returns what stopped it
// (nil here) even when its context has ended already: a caller whose
// deadline passed gets no shutdown timeout for a pipeline nothing is left
// running in.
func TestStopWithAnEndedContextAfterTheStopReturnsNil(t *testing.T) {
	p := pushOnly(t)
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Stop = %v, want nil", err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		if err := p.Stop(ended); err != nil {
			t.Fatalf("Stop with an ended context after the pipeline stopped = %v, want nil", err)
		}
	}
}

// stopCutShort stops p with a deadline its stuck source makes it miss,
// and checks that Stop reports the shutdown timeout.
func stopCutShort(t *testing.T, p *pipeline.Pipeline[uint64, uint64]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Stop(ctx); !errors.Is(err, pipeline.ErrShutdownTimeout) {
		t.Fatalf("Stop = %v, want a shutdown timeout", err)
	}
}

// Guarantee: Stop that returns because its context ended while a
// handler still runs says why: its error wraps ErrShutdownTimeout (the
// drain was cut short) and the context's error, context.Canceled once
// cancelled, context.DeadlineExceeded past its deadline.
func TestStopCutShortByItsContextWrapsTheContextsError(t *testing.T) {
	ends := map[string]struct {
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		"cancelled": {func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				synctest.Wait() // Stop waits for the handler
				cancel()
			}()
			return ctx, cancel
		}, context.Canceled},
		"past its deadline": {func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, context.DeadlineExceeded},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				started, release, unblock := stuckGate()
				defer unblock()
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:            "cut",
					ShutdownTimeout: time.Hour,
					Processors:      processor.Options[uint64, uint64]{Concurrency: 1, Handle: stuckHandler(started, release)},
				})
				startWithOne(t, p, started)
				ctx, cancel := end.ctx()
				defer cancel()
				err := p.Stop(ctx)
				if !errors.Is(err, pipeline.ErrShutdownTimeout) || !errors.Is(err, end.want) {
					t.Errorf("Stop cut short by its context = %v, want an error wrapping ErrShutdownTimeout and %v", err, end.want)
				}
				unblock()
				<-p.Done()
			})
		})
	}
}
