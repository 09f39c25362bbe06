package observe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// statsFunc is a Pipeline whose type cannot be compared: Add has no
// identity to go by.
type statsFunc func() pipeline.Stats

func (f statsFunc) Stats() pipeline.Stats { return f() }

// expectPendingAtOnce fails t unless err wraps ErrStats and
// ErrStatsPending and took is 0 (in a synctest bubble: the call did not
// wait).
func expectPendingAtOnce(t *testing.T, what string, err error, took time.Duration) {
	t.Helper()
	if took != 0 {
		t.Errorf("%s returned after %v, want at once", what, took)
	}
	if !errors.Is(err, observe.ErrStats) || !errors.Is(err, observe.ErrStatsPending) {
		t.Errorf("%s returned %v, want an error wrapping ErrStats and ErrStatsPending", what, err)
	}
}

// Guarantee: a Stats that never returns holds one goroutine however
// often Add, Replace or AddKafka of what it reports is retried: once a
// call gave up waiting for it, each later Add or Replace of the same
// pipeline, and each later AddKafka reading the same source, returns at
// once an error wrapping ErrStats and ErrStatsPending, without calling
// it again; once it returns, the pipeline can be added. A pipeline whose
// type cannot be compared is held to one such call per Observer.
func TestARetriedAddOfWhatHasAStuckStatsReturnsErrStatsPendingAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		obs := observe.New(observe.Options{StatsTimeout: timeout})
		stuck := newFaulty(pipeline.Stats{Name: "stuck", Started: time.Now()})
		stuck.setMode(statsBlock)
		defer stuck.unblock() // so that the bubble's goroutines end when the test fails

		start := time.Now()
		err := obs.Add(t.Context(), stuck)
		if took := time.Since(start); took != timeout || !errors.Is(err, observe.ErrStats) || errors.Is(err, observe.ErrStatsPending) {
			t.Fatalf("the first Add returned %v after %v, want ErrStats (not ErrStatsPending) after %v", err, took, timeout)
		}
		for range 3 {
			start = time.Now()
			err = obs.Add(t.Context(), stuck)
			expectPendingAtOnce(t, "a later Add", err, time.Since(start))
			start = time.Now()
			_, err = obs.Replace(t.Context(), stuck)
			expectPendingAtOnce(t, "a later Replace", err, time.Since(start))
		}
		if n := stuck.faulted.Load(); n != 1 {
			t.Errorf("the Stats that blocks was called %d times by seven calls, want once", n)
		}

		src := newFaulty(kafka.Stats{GroupID: "billing"})
		src.setMode(statsBlock)
		defer src.unblock()
		start = time.Now()
		err = obs.AddKafka(t.Context(), src, src) // given twice: its Stats names it in the error
		if took := time.Since(start); took != timeout || !errors.Is(err, observe.ErrDuplicate) || !errors.Is(err, observe.ErrStats) {
			t.Errorf("the first AddKafka returned %v after %v, want ErrDuplicate and ErrStats after %v", err, took, timeout)
		}
		start = time.Now()
		err = obs.AddKafka(t.Context(), src, src)
		expectPendingAtOnce(t, "a later AddKafka", err, time.Since(start))
		if n := src.faulted.Load(); n != 1 {
			t.Errorf("the Kafka source's Stats that blocks was called %d times by two AddKafka, want once", n)
		}

		release := make(chan struct{})
		defer close(release)
		var calls atomic.Int32
		blocking := func() pipeline.Stats { calls.Add(1); <-release; return pipeline.Stats{} }
		if err := obs.Add(t.Context(), statsFunc(blocking)); !errors.Is(err, observe.ErrStats) {
			t.Errorf("Add of an uncomparable pipeline whose Stats blocks returned %v, want ErrStats", err)
		}
		start = time.Now()
		err = obs.Add(t.Context(), statsFunc(blocking))
		expectPendingAtOnce(t, "a later Add of an uncomparable pipeline", err, time.Since(start))
		if n := calls.Load(); n != 1 {
			t.Errorf("the uncomparable pipeline's Stats was called %d times, want once", n)
		}

		stuck.setMode(statsAnswer)
		stuck.unblock()
		synctest.Wait()
		add(t, obs, stuck)
		if snap := obs.Snapshot(t.Context()); len(snap.Pipelines) != 1 {
			t.Errorf("once its Stats returned, Add added %+v, want the pipeline", snap.Pipelines)
		}
	})
}

// blockingPipeline is a Pipeline whose Stats signals entered and blocks
// until release is closed.
type blockingPipeline struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingPipeline) Stats() pipeline.Stats {
	b.entered <- struct{}{}
	<-b.release
	return pipeline.Stats{Name: "blocking"}
}

// Guarantee: Add returns when its context ends, before
// Options.StatsTimeout; the goroutine of a Stats that does not return
// stays the Observer's: Close waits for it until its own context ends
// (then its error wraps ErrStatsPending and the context's cause), refuses
// every later Add with ErrClosed, and returns nil once that Stats has
// returned and its goroutine ended.
func TestCloseWaitsForTheStatsCallsTheObserverStarted(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	obs := observe.New(observe.Options{StatsTimeout: observe.MaxStatsTimeout})
	p := &blockingPipeline{entered: make(chan struct{}, 1), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(p.release)
		}
	}()

	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-p.entered; cancel() }()
	err := obs.Add(ctx, p)
	if !errors.Is(err, observe.ErrStats) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Add whose context was cancelled returned %v, want an error wrapping ErrStats and context.Canceled", err)
	}
	if err := obs.Add(t.Context(), p); !errors.Is(err, observe.ErrStatsPending) {
		t.Errorf("a later Add returned %v, want ErrStatsPending", err)
	}

	short, cancelShort := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancelShort()
	if err := obs.Close(short); !errors.Is(err, observe.ErrStatsPending) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close while the Stats blocks returned %v, want ErrStatsPending and context.DeadlineExceeded", err)
	}
	if err := obs.Add(t.Context(), p); !errors.Is(err, observe.ErrClosed) {
		t.Errorf("Add after Close returned %v, want ErrClosed", err)
	}
	if snap := obs.Snapshot(t.Context()); len(snap.Failed) != 0 || len(snap.Pipelines) != 0 {
		t.Errorf("Snapshot after Close reports %+v, want nothing (nothing was added)", snap)
	}

	close(p.release)
	released = true
	if err := obs.Close(t.Context()); err != nil {
		t.Errorf("Close once the Stats returned: %v", err)
	}
}

// Guarantee: Health, Readiness and Snapshot return when their context
// ends, before Options.StatsTimeout, a pipeline whose Stats has not
// returned reported failed with the context's cause.
func TestChecksAndSnapshotReturnWhenTheirContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := observe.New(observe.Options{StatsTimeout: observe.MaxStatsTimeout})
		defer func() {
			if err := obs.Close(t.Context()); err != nil {
				t.Error(err)
			}
		}()
		stuck := newFaulty(pipeline.Stats{Name: "stuck", Started: time.Now()})
		add(t, obs, stuck)
		stuck.setMode(statsBlock)
		defer stuck.unblock()

		const bound = time.Second
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		defer cancel()
		start := time.Now()
		for name, reports := range map[string][]observe.PipelineReport{"Health": obs.Health(ctx), "Readiness": obs.Readiness(ctx)} {
			if len(reports) != 1 || reports[0].OK || reports[0].Reason == "" {
				t.Errorf("%s reported %+v, want the pipeline failed", name, reports)
			}
		}
		snap := obs.Snapshot(ctx)
		if took := time.Since(start); took != bound {
			t.Errorf("Health, Readiness and Snapshot returned after %v, want at their context's end, %v", took, bound)
		}
		if len(snap.Failed) != 1 {
			t.Errorf("Snapshot reported %+v, want the pipeline failed", snap)
		}
	})
}

// errShutdown is the cause a caller gives the context it ends.
var errShutdown = errors.New("shutting down")

// expectEnded fails t unless err wraps sentinel, the context's error
// want and its cause errShutdown.
func expectEnded(t *testing.T, what string, err, sentinel, want error) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, want) || !errors.Is(err, errShutdown) {
		t.Errorf("%s returned %v, want an error wrapping %v, %v and the cause %v", what, err, sentinel, want, errShutdown)
	}
}

// Guarantee: when the caller's context ends with a cause (a deadline or
// a cancellation given one) while a Stats blocks, Add, Replace, AddKafka
// and Close say so as they do without a cause: their error wraps the
// context's error (context.DeadlineExceeded, context.Canceled), and the
// cause too.
func TestAContextEndedWithACauseIsReportedAsEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := observe.New(observe.Options{StatsTimeout: observe.MaxStatsTimeout})
		var release []func()
		defer func() {
			for _, r := range release {
				r()
			}
		}()
		stuck := func() *faulty[pipeline.Stats] {
			f := newFaulty(pipeline.Stats{Name: "stuck", Started: time.Now()})
			f.setMode(statsBlock)
			release = append(release, f.unblock)
			return f
		}
		calls := map[string]func(ctx context.Context) error{
			"Add":     func(ctx context.Context) error { return obs.Add(ctx, stuck()) },
			"Replace": func(ctx context.Context) error { _, err := obs.Replace(ctx, stuck()); return err },
			"AddKafka": func(ctx context.Context) error {
				f := newFaulty(kafka.Stats{GroupID: "billing"})
				f.setMode(statsBlock)
				release = append(release, f.unblock)
				return obs.AddKafka(ctx, f, f) // given twice: its Stats names it in the error
			},
		}
		for name, call := range calls {
			ctx, stop := context.WithTimeoutCause(t.Context(), time.Second, errShutdown)
			expectEnded(t, name+" past its context's deadline", call(ctx), observe.ErrStats, context.DeadlineExceeded)
			stop()
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(errShutdown)
			expectEnded(t, name+" with a cancelled context", call(ctx), observe.ErrStats, context.Canceled)
		}

		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(errShutdown)
		expectEnded(t, "Close with a cancelled context", obs.Close(ctx), observe.ErrStatsPending, context.Canceled)
		ctx, stop := context.WithTimeoutCause(t.Context(), time.Second, errShutdown)
		defer stop()
		expectEnded(t, "Close past its context's deadline", obs.Close(ctx), observe.ErrStatsPending, context.DeadlineExceeded)
	})
}

// Guarantee: when the caller's context ends without a cause while a
// Stats blocks, the error of Add and of Close names the context's error
// once (its cause is that same error, not a second one).
func TestAContextEndedWithoutACauseIsNamedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := observe.New(observe.Options{StatsTimeout: observe.MaxStatsTimeout})
		f := newFaulty(pipeline.Stats{Name: "stuck", Started: time.Now()})
		f.setMode(statsBlock)
		defer f.unblock()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for what, err := range map[string]error{"Add": obs.Add(ctx, f), "Close": obs.Close(ctx)} {
			if n := strings.Count(fmt.Sprint(err), context.Canceled.Error()); !errors.Is(err, context.Canceled) || n != 1 {
				t.Errorf("%s with a cancelled context returned %v, naming %q %d times, want an error wrapping it and naming it once", what, err, context.Canceled, n)
			}
		}
	})
}
