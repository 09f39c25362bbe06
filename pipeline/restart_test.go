package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// unreachableSource never connects: each Run waits connectFor (a client's
// connect timeout), then fails without creating a feed.
type unreachableSource struct {
	producer.Basic
	connectFor time.Duration
	err        error
	runs       atomic.Int32
}

func (s *unreachableSource) Run(ctx context.Context, _ *producer.Stage[uint64]) error {
	s.runs.Add(1)
	t := time.NewTimer(s.connectFor)
	defer t.Stop()
	select {
	case <-t.C:
		return s.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Guarantee: a pipeline whose source can never connect, each attempt taking
// longer than the restart window can count, ends by itself: Run returns a
// *producer.RestartError naming the consecutive-failure rule, instead of
// restarting the source forever.
func TestUnreachableSourceEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errDial := errors.New("dial tcp 192.0.2.1:9092: i/o timeout")
		src := &unreachableSource{connectFor: 3 * time.Second, err: errDial}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "unreachable",
			Producer:   producer.Options[uint64]{Source: src},
			Processors: processor.Options[uint64, uint64]{Handle: identity},
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		err := p.Run(ctx)
		if ctx.Err() != nil {
			t.Fatalf("Run returned only when its context ended, after %d runs (%v)", src.runs.Load(), err)
		}
		var re *producer.RestartError
		if !errors.As(err, &re) || !errors.Is(err, producer.ErrTooManyRestarts) || !errors.Is(err, errDial) {
			t.Fatalf("Run = %v, want a *producer.RestartError wrapping the dial error", err)
		}
		if re.Rule != producer.RuleMaxConsecutiveFailures || re.ConsecutiveFailures != producer.DefaultMaxConsecutiveFailures {
			t.Fatalf("RestartError = %+v, want %d consecutive failures", re, producer.DefaultMaxConsecutiveFailures)
		}
		if n := src.runs.Load(); n != producer.DefaultMaxConsecutiveFailures {
			t.Fatalf("source ran %d times, want %d", n, producer.DefaultMaxConsecutiveFailures)
		}
		st := p.SourceStatus()
		if len(st) != 1 || st[0].State != producer.StateFailed || !errors.Is(st[0].LastError, errDial) {
			t.Fatalf("SourceStatus = %+v, want one failed stage with the dial error", st)
		}
	})
}

// flakySource fails its first run like an unreachableSource, then connects,
// delivers one message and waits to be stopped.
type flakySource struct {
	unreachableSource
}

func (s *flakySource) Run(ctx context.Context, st *producer.Stage[uint64]) error {
	if s.runs.Load() == 0 {
		return s.unreachableSource.Run(ctx, st)
	}
	s.runs.Add(1)
	f := st.NewFeed("partition-0", nil)
	if _, err := f.Acquire(ctx, 1); err != nil {
		return nil
	}
	f.Deliver(message.New[uint64](1, acker.Discard, 1))
	<-ctx.Done()
	return nil
}

// Guarantee: SourceStatus shows each producer stage's state as it changes:
// starting before Start, connecting while Run has no feed, restarting after
// a failure (with the restart count, failures in a row and last error),
// running once a feed exists (failures in a row back to 0 once it
// delivers), stopped after Stop; each with the time it was entered.
func TestSourceStatusFollowsTheStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errRefused := errors.New("connection refused")
		src := &flakySource{unreachableSource{connectFor: 3 * time.Second, err: errRefused}}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:       "status",
			Producer:   producer.Options[uint64]{Source: src},
			Processors: processor.Options[uint64, uint64]{Handle: identity},
		})
		check := func(step string, want producer.StageStatus) {
			t.Helper()
			st := p.SourceStatus()
			if len(st) != 1 {
				t.Fatalf("%s: SourceStatus = %+v, want one stage", step, st)
			}
			got := st[0]
			if got.Stage != "status.producer.0" || got.State != want.State || !got.Since.Equal(want.Since) ||
				got.Restarts != want.Restarts || got.ConsecutiveFailures != want.ConsecutiveFailures ||
				!errors.Is(got.LastError, want.LastError) {
				t.Fatalf("%s: SourceStatus = %+v, want %+v", step, got, want)
			}
		}
		t0 := time.Now()
		check("before Start", producer.StageStatus{State: producer.StateStarting, Since: t0})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		check("first run", producer.StageStatus{State: producer.StateConnecting, Since: t0})

		time.Sleep(3 * time.Second)
		synctest.Wait()
		t1 := t0.Add(3 * time.Second)
		check("after the failure", producer.StageStatus{State: producer.StateRestarting, Since: t1,
			Restarts: 1, ConsecutiveFailures: 1, LastError: errRefused})

		time.Sleep(producer.DefaultRestartBackoff)
		synctest.Wait()
		t2 := t1.Add(producer.DefaultRestartBackoff)
		check("second run", producer.StageStatus{State: producer.StateRunning, Since: t2,
			Restarts: 1, ConsecutiveFailures: 0, LastError: errRefused})

		time.Sleep(time.Second)
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		check("after Stop", producer.StageStatus{State: producer.StateStopped, Since: t2.Add(time.Second),
			Restarts: 1, LastError: errRefused})
	})
}

// Guarantee: a pipeline stopped before it was started reports its stages
// stopped, not starting; a push-only pipeline has no stage to report.
func TestSourceStatusWithoutRun(t *testing.T) {
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "never",
		Producer:   producer.Options[uint64]{Source: &unreachableSource{connectFor: time.Hour}, Concurrency: 2},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.SourceStatus()
	if len(st) != 2 || st[0].State != producer.StateStopped || st[1].State != producer.StateStopped || st[1].Stage != "never.producer.1" {
		t.Fatalf("SourceStatus = %+v, want two stopped stages", st)
	}
	push := mustNew(t, pipeline.Options[uint64, uint64]{Name: "push", Processors: processor.Options[uint64, uint64]{Handle: identity}})
	if st := push.SourceStatus(); len(st) != 0 {
		t.Fatalf("push-only SourceStatus = %+v, want none", st)
	}
}
