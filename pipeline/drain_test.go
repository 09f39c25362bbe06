package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/telemetry"
)

// callLog records, in order, the drains and the source's Close.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) note(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *callLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// loggedSource is a gridSource whose Close is logged.
type loggedSource struct {
	*gridSource
	log *callLog
}

func (s loggedSource) Close(context.Context) error { s.log.note("source closed"); return nil }

// funcDrainer is a Drainer made of a function.
type funcDrainer func(ctx context.Context) error

func (f funcDrainer) Drain(ctx context.Context) error { return f(ctx) }

// Guarantee: the drainers are drained in order, after every message's
// outcome has been delivered and before the source is closed.
func TestDrainersRunAfterOutcomesBeforeSourceClose(t *testing.T) {
	const n = 20
	rec := acker.NewRecorder(false)
	log := &callLog{}
	drainer := func(i int) pipeline.Drainer {
		return funcDrainer(func(context.Context) error {
			log.note(fmt.Sprintf("drainer %d drained after %d outcomes", i, rec.Total()))
			return nil
		})
	}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "drained",
		Drainers:   []pipeline.Drainer{drainer(0), drainer(1)},
		Producer:   producer.Options[uint64]{Source: loggedSource{&gridSource{feeds: 1, perFeed: n, ack: rec}, log}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Run(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := []string{"drainer 0 drained after 20 outcomes", "drainer 1 drained after 20 outcomes", "source closed"}
	if got := log.list(); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	assertExactlyOnce(t, rec, n)
}

// waitingSource delivers nothing until its context ends; its Close is
// logged.
type waitingSource struct {
	producer.Basic
	log *callLog
}

func (s *waitingSource) Run(ctx context.Context, _ *producer.Stage[uint64]) error {
	<-ctx.Done()
	return nil
}

func (s *waitingSource) Close(context.Context) error { s.log.note("source closed"); return nil }

// stopDraining starts a pipeline named name whose source waits for its
// context and whose drainers are ds, then stops it (inside a synctest
// bubble): the pipeline, how long Stop took and what it returned.
func stopDraining(t *testing.T, name string, timeout time.Duration, log *callLog, ds ...pipeline.Drainer) (*pipeline.Pipeline[uint64, uint64], time.Duration, error) {
	t.Helper()
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:            name,
		ShutdownTimeout: timeout,
		Drainers:        ds,
		Producer:        producer.Options[uint64]{Source: &waitingSource{log: log}},
		Processors:      processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	begin := time.Now()
	err := p.Stop(context.Background())
	return p, time.Since(begin), err
}

// Guarantee: a drain the shutdown timeout cuts short is returned by Stop and
// Err as a *DrainError (wrapping ErrDrain and the context's error), and the
// next drainers and the source's Close still run.
func TestDrainCutShortIsReportedAndSourceStillCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		const timeout = 3 * time.Second
		p, took, err := stopDraining(t, "drain-cut", timeout, log,
			funcDrainer(func(ctx context.Context) error {
				<-ctx.Done()
				log.note("drainer 0 gave up")
				return ctx.Err()
			}),
			funcDrainer(func(context.Context) error { log.note("drainer 1 drained"); return nil }))
		if took != timeout {
			t.Errorf("Stop took %v, want the drain to wait ShutdownTimeout (%v)", took, timeout)
		}
		var de *pipeline.DrainError
		if !errors.As(err, &de) || de.Index != 0 || !errors.Is(err, pipeline.ErrDrain) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want a *DrainError of drainers[0] wrapping ErrDrain and the deadline", err)
		}
		if want := "pipeline: draining before closing the source: drainers[0]: context deadline exceeded"; err.Error() != want {
			t.Fatalf("Stop = %q, want %q", err, want)
		}
		if !errors.Is(p.Err(), pipeline.ErrDrain) {
			t.Fatalf("Err = %v, want the drain error", p.Err())
		}
		want := []string{"drainer 0 gave up", "drainer 1 drained", "source closed"}
		if got := log.list(); !slices.Equal(got, want) {
			t.Fatalf("calls %q, want %q", got, want)
		}
	})
}

// Guarantee: a Drain that ignores its context does not hold Stop: Stop
// stops waiting CancelGrace after its ShutdownTimeout and names the drainer;
// the source is closed once it returns.
func TestStuckDrainerIsNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock()
		const timeout = 3 * time.Second
		p, took, err := stopDraining(t, "drain-stuck", timeout, log,
			funcDrainer(func(context.Context) error { return nil }),
			funcDrainer(func(context.Context) error { <-release; return nil }))
		if want := timeout + pipeline.CancelGrace; took != want {
			t.Errorf("Stop took %v, want %v", took, want)
		}
		assertStraggler(t, err, pipeline.Straggler{Kind: pipeline.KindDrainer, Stage: "drain-stuck", Index: 1})
		if !strings.Contains(err.Error(), `drainer 1 of "drain-stuck"`) {
			t.Fatalf("Stop = %q, want the drainer named", err)
		}
		if got := log.list(); len(got) != 0 {
			t.Fatalf("calls %q before the drainer returned, want none", got)
		}
		unblock()
		<-p.Done()
		if got := log.list(); !slices.Equal(got, []string{"source closed"}) {
			t.Fatalf("calls %q, want the source closed once the drainer returned", got)
		}
	})
}

// Guarantee: a *DrainError names the drainer that failed by its index in
// Options.Drainers, in Index and in its message.
func TestDrainErrorNamesTheDrainerThatFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		failed := errors.New("downstream unreachable")
		_, _, err := stopDraining(t, "drain-second", time.Second, log,
			funcDrainer(func(context.Context) error { return nil }),
			funcDrainer(func(context.Context) error { return failed }))
		var de *pipeline.DrainError
		if !errors.As(err, &de) || de.Index != 1 || !errors.Is(err, failed) {
			t.Fatalf("Stop = %v, want a *DrainError of drainers[1]", err)
		}
		if want := "pipeline: draining before closing the source: drainers[1]: downstream unreachable"; err.Error() != want {
			t.Fatalf("Stop = %q, want %q", err, want)
		}
	})
}

// Guarantee: the PipelineStop hook is told what stopped the pipeline
// abnormally (its Err): here the *DrainError of a drainer that failed.
func TestPipelineStopHookIsToldTheStopsError(t *testing.T) {
	failed := errors.New("downstream unreachable")
	got := make(chan error, 1)
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "stop-hook-err",
		Drainers:   []pipeline.Drainer{funcDrainer(func(context.Context) error { return failed })},
		Telemetry:  &telemetry.Hooks{PipelineStop: func(_ context.Context, e telemetry.Pipeline) { got <- e.Err }},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctxT(t, 10*time.Second)); !errors.Is(err, failed) {
		t.Fatalf("Stop = %v, want the drain error", err)
	}
	var de *pipeline.DrainError
	if err := <-got; !errors.As(err, &de) || !errors.Is(err, failed) {
		t.Fatalf("PipelineStop was told Err %v, want the *DrainError", err)
	}
}

// Guarantee: a Drain that panics or ends its goroutine (runtime.Goexit,
// as t.FailNow does) is a failed drain: Stop returns at once a *DrainError
// naming it (wrapping a *message.PanicError, or message.ErrHandlerExited),
// the next drainers are drained and the source is closed, and Done closes.
func TestDrainThatPanicsOrExitsIsAFailedDrain(t *testing.T) {
	cases := []struct {
		name  string
		drain func()
		is    func(error) bool
	}{
		{"panic", func() { panic("drainer bug") }, func(err error) bool {
			var pe *message.PanicError
			return errors.As(err, &pe) && pe.Value == "drainer bug" && len(pe.Stack) > 0
		}},
		{"exit", runtime.Goexit, func(err error) bool { return errors.Is(err, message.ErrHandlerExited) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &callLog{}
				p, took, err := stopDraining(t, "drain-"+tc.name, time.Second, log,
					funcDrainer(func(context.Context) error { tc.drain(); return nil }),
					funcDrainer(func(context.Context) error { log.note("drainer 1 drained"); return nil }))
				var de *pipeline.DrainError
				if !errors.As(err, &de) || de.Index != 0 || !tc.is(err) {
					t.Fatalf("Stop = %v, want a *DrainError of drainers[0] for its %s", err, tc.name)
				}
				if took != 0 {
					t.Errorf("Stop took %v, want it to return at once", took)
				}
				<-p.Done()
				if got, want := log.list(), []string{"drainer 1 drained", "source closed"}; !slices.Equal(got, want) {
					t.Fatalf("calls %q, want %q", got, want)
				}
			})
		})
	}
}

// Guarantee: when a source gives up and the drain that follows is cut
// short, Run and Err carry both: errors.As finds the
// *producer.RestartError and the *DrainError, and errors.Is matches
// ErrTooManyRestarts, the source's error, ErrDrain and the deadline.
func TestAGiveUpAndACutDrainBothMatchInTheJoinedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBroker := errors.New("broker unreachable")
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:            "gave-up",
			ShutdownTimeout: time.Second,
			Drainers: []pipeline.Drainer{funcDrainer(func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			})},
			Producer: producer.Options[uint64]{
				Source:  &gridSource{feeds: 1, perFeed: 1, ack: acker.Discard, fail: func(int) error { return errBroker }},
				Restart: producer.Restart{MaxRestarts: 1, Window: time.Minute, Backoff: time.Millisecond, MaxBackoff: time.Millisecond},
			},
			Processors: processor.Options[uint64, uint64]{Handle: identity},
		})
		err := p.Run(t.Context())
		for what, got := range map[string]error{"Run": err, "Err": p.Err()} {
			var re *producer.RestartError
			var de *pipeline.DrainError
			if !errors.As(got, &re) || !errors.As(got, &de) {
				t.Errorf("%s = %v, want a *producer.RestartError and a *pipeline.DrainError", what, got)
			}
			for _, want := range []error{producer.ErrTooManyRestarts, errBroker, pipeline.ErrDrain, context.DeadlineExceeded} {
				if !errors.Is(got, want) {
					t.Errorf("%s = %v, want it to match %v", what, got, want)
				}
			}
		}
	})
}
