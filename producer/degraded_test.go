package producer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/producer"
)

// degradingSource is a source whose runs follow the steps the test sends
// them, each on the run's goroutine with the stage and the run's health
// handle; a step that returns an error ends its run with it.
type degradingSource struct {
	producer.Basic
	steps chan func(st *producer.Stage[item], h *producer.RunHealth) error
	stage chan *producer.Stage[item]
}

func (s *degradingSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	select {
	case s.stage <- st:
	default:
	}
	h := st.Health()
	for {
		select {
		case f := <-s.steps:
			if err := f(st, h); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// startDegrading starts a producer on a degradingSource, logging to log
// (nil: nowhere).
func startDegrading(t *testing.T, log *slog.Logger) (*degradingSource, *harness) {
	src := &degradingSource{
		steps: make(chan func(*producer.Stage[item], *producer.RunHealth) error),
		stage: make(chan *producer.Stage[item], 1),
	}
	return src, start(t, "p", producer.Options[item]{Source: src}, newRecorder(), log)
}

// stopFetching ends the source's run and waits until the stage has
// stopped.
func stopFetching(h *harness) {
	h.p.StopFetching()
	synctest.Wait()
}

// do runs f as a step of the source's current run, and waits until
// everything it set off is done.
func (s *degradingSource) do(f func(st *producer.Stage[item], h *producer.RunHealth)) {
	s.steps <- func(st *producer.Stage[item], h *producer.RunHealth) error { f(st, h); return nil }
	synctest.Wait()
}

// Guarantee: a source that reports its run cannot read from its broker
// moves the stage to degraded, with its error as LastError and one WARN
// line however often it reports it, and back to running, with one INFO
// line, when it reports that it reads again.
func TestDegradedStageSaysWhyAndRecoversWithOneLineEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		src, h := startDegrading(t, log)
		src.do(func(st *producer.Stage[item], _ *producer.RunHealth) {
			if got := st.Status().State; got != producer.StateConnecting {
				t.Errorf("state before the first feed %q, want connecting", got)
			}
			st.NewFeed("p0", nil)
		})
		if st := h.p.Status()[0]; st.State != producer.StateRunning {
			t.Fatalf("state %q, want running", st.State)
		}
		time.Sleep(time.Second)
		errDown := errors.New("kafka: client has run out of available brokers to talk to")
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Degrade(errDown) })
		st := h.p.Status()[0]
		if st.State != producer.StateDegraded || !errors.Is(st.LastError, errDown) || st.ConsecutiveFailures != 0 {
			t.Fatalf("status %+v, want degraded with LastError %v and no failure", st, errDown)
		}
		since := st.Since
		time.Sleep(3 * time.Second)
		errAgain := errors.New("dial tcp 10.0.0.1:9092: connect: connection refused")
		for range 5 {
			src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Degrade(errAgain) })
		}
		if st := h.p.Status()[0]; st.State != producer.StateDegraded || !st.Since.Equal(since) || !errors.Is(st.LastError, errAgain) {
			t.Fatalf("status %+v after more reports, want degraded since %v with the latest error", st, since)
		}
		if n := countLines(lines(), "WARN "+producer.DegradedLog); n != 1 {
			t.Fatalf("%d degraded lines, want 1: %q", n, lines())
		}
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Recovered(); rh.Recovered() })
		if st := h.p.Status()[0]; st.State != producer.StateRunning || !st.Since.After(since) {
			t.Fatalf("status %+v after recovery, want running since now", st)
		}
		if n := countLines(lines(), "INFO "+producer.RecoveredLog, "degraded=3s"); n != 1 {
			t.Fatalf("%d recovered lines saying degraded=3s, want 1: %q", n, lines())
		}
		stopFetching(h)
	})
}

// Guarantee: a run degraded before it created a feed goes back to
// connecting, not running, when it recovers, and a feed created while it
// is degraded leaves it degraded until its source says it reads again.
func TestDegradedBeforeTheFirstFeedRecoversToItsRunsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, h := startDegrading(t, nil)
		state := func() producer.State { return h.p.Status()[0].State }
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Degrade(nil); rh.Recovered() })
		if got := state(); got != producer.StateConnecting {
			t.Fatalf("state %q after a recovery before any feed, want connecting", got)
		}
		src.do(func(st *producer.Stage[item], rh *producer.RunHealth) { rh.Degrade(nil); st.NewFeed("p0", nil) })
		if st := h.p.Status()[0]; st.State != producer.StateDegraded || !errors.Is(st.LastError, producer.ErrUnreachable) {
			t.Fatalf("status %+v, want degraded with ErrUnreachable after a feed created while degraded", st)
		}
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Recovered() })
		if got := state(); got != producer.StateRunning {
			t.Fatalf("state %q, want running", got)
		}
		stopFetching(h)
	})
}

// Guarantee: a report through the handle of a run that has returned, or
// through one obtained once no run is up (a goroutine of the source that
// outlived its run), does not move the stage out of the state the end of
// the run gave it.
func TestDegradeOutsideARunChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, h := startDegrading(t, nil)
		var ran *producer.RunHealth
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { ran = rh })
		st := <-src.stage
		stopFetching(h)
		ran.Degrade(errors.New("late"))
		st.Health().Degrade(errors.New("later"))
		if got := h.p.Status()[0]; got.State != producer.StateStopped || got.LastError != nil {
			t.Fatalf("status %+v after a late Degrade, want stopped with no error", got)
		}
	})
}

// Guarantee: the line a recovery logs names the state the stage goes back
// to: connecting for a run that has created no feed yet, running for one
// that has.
func TestRecoveryLineNamesTheStateTheStageReturnsTo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		src, h := startDegrading(t, log)
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Degrade(nil); rh.Recovered() })
		if n := countLines(lines(), "INFO "+producer.RecoveredLog, "state=connecting"); n != 1 {
			t.Fatalf("%d recovered lines saying state=connecting, want 1: %q", n, lines())
		}
		src.do(func(st *producer.Stage[item], rh *producer.RunHealth) {
			st.NewFeed("p0", nil)
			rh.Degrade(nil)
			rh.Recovered()
		})
		if n := countLines(lines(), "INFO "+producer.RecoveredLog, "state=running"); n != 1 {
			t.Fatalf("%d recovered lines saying state=running, want 1: %q", n, lines())
		}
		stopFetching(h)
	})
}

// failRun makes the source's current run connect, fail with err, and
// returns that run's health handle once the stage has run the source
// again and the next run has connected too.
func (s *degradingSource) failRun(err error) *producer.RunHealth {
	var stale *producer.RunHealth
	s.steps <- func(st *producer.Stage[item], h *producer.RunHealth) error {
		st.NewFeed("p0", nil)
		stale = h
		return err
	}
	// The send waits out the restart backoff: the next run takes it.
	s.do(func(st *producer.Stage[item], _ *producer.RunHealth) { st.NewFeed("p0", nil) })
	return stale
}

// Guarantee: a goroutine of a run that has returned which reports the
// broker out of reach while the stage's next run is up leaves that run
// alone: the stage stays running, its LastError is still the failed
// run's error, and no line is logged.
func TestStaleRunsDegradeLeavesTheNextRunRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		src, h := startDegrading(t, log)
		errRun := errors.New("subscribe: topic terminated")
		stale := src.failRun(errRun)
		before := h.p.Status()[0]
		if before.State != producer.StateRunning || !errors.Is(before.LastError, errRun) {
			t.Fatalf("status %+v, want the second run running with the first run's error", before)
		}
		stale.Degrade(errors.New("kafka: client has run out of available brokers to talk to"))
		stale.Degrade(nil)
		unchanged(t, h, before, lines, producer.DegradedLog, "a stale run's Degrade")
		stopFetching(h)
	})
}

// Guarantee: a goroutine of a run that has returned which reports the
// broker reachable again does not end the degrade the stage's next run
// reported: only that run's own report does.
func TestStaleRunsRecoveredLeavesTheNextRunDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		src, h := startDegrading(t, log)
		stale := src.failRun(errors.New("subscribe: topic terminated"))
		errDown := errors.New("dial tcp 10.0.0.1:6650: connect: connection refused")
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Degrade(errDown) })
		before := h.p.Status()[0]
		if before.State != producer.StateDegraded || !errors.Is(before.LastError, errDown) {
			t.Fatalf("status %+v, want the second run degraded with %v", before, errDown)
		}
		time.Sleep(time.Second)
		stale.Recovered()
		if got := h.p.Status()[0]; got != before {
			t.Fatalf("status %+v after a stale run's Recovered, want it unchanged: %+v", got, before)
		}
		if n := countLines(lines(), producer.RecoveredLog); n != 0 {
			t.Fatalf("%d recovered lines after a stale run's Recovered, want none: %q", n, lines())
		}
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Recovered() })
		if got := h.p.Status()[0].State; got != producer.StateRunning {
			t.Fatalf("state %q after the run's own Recovered, want running", got)
		}
		stopFetching(h)
	})
}

// Guarantee: Recovered on a stage that is not degraded changes nothing:
// the state and its Since stay, and no line is logged.
func TestRecoveredWhileNotDegradedChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		src, h := startDegrading(t, log)
		src.do(func(st *producer.Stage[item], _ *producer.RunHealth) { st.NewFeed("p0", nil) })
		before := h.p.Status()[0]
		time.Sleep(time.Second)
		src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) { rh.Recovered() })
		unchanged(t, h, before, lines, producer.RecoveredLog, "Recovered while running")
		stopFetching(h)
	})
}

// Guarantee: StageStatus.Since is when the stage entered its state: the
// failure for restarting, the end of the backoff for connecting, the
// first feed for running.
func TestStatusSinceIsWhenTheStateWasEntered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, h := startDegrading(t, nil)
		synctest.Wait()
		time.Sleep(time.Second)
		failedAt := time.Now()
		src.steps <- func(*producer.Stage[item], *producer.RunHealth) error { return errors.New("boom") }
		synctest.Wait()
		if st := h.p.Status()[0]; st.State != producer.StateRestarting || !st.Since.Equal(failedAt) {
			t.Fatalf("status %+v, want restarting since %v", st, failedAt)
		}
		time.Sleep(producer.DefaultRestartBackoff)
		synctest.Wait()
		if st := h.p.Status()[0]; st.State != producer.StateConnecting || !st.Since.Equal(failedAt.Add(producer.DefaultRestartBackoff)) {
			t.Fatalf("status %+v, want connecting since the end of the backoff", st)
		}
		time.Sleep(time.Second)
		src.do(func(st *producer.Stage[item], _ *producer.RunHealth) { st.NewFeed("p0", nil) })
		if st, want := h.p.Status()[0], failedAt.Add(producer.DefaultRestartBackoff+time.Second); st.State != producer.StateRunning || !st.Since.Equal(want) {
			t.Fatalf("status %+v, want running since %v", st, want)
		}
		stopFetching(h)
	})
}

// Guarantee: Stage.FeedStats lists the current run's open feeds, by the
// name they were registered with, in registration order, each with its own
// counters; a closed feed is left out, and between runs there are none.
func TestFeedStatsListTheRunsOpenFeedsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, h := startDegrading(t, nil)
		var stage *producer.Stage[item]
		src.do(func(st *producer.Stage[item], _ *producer.RunHealth) {
			stage = st
			st.NewFeed("a", nil)
			b := st.NewFeed("b", nil)
			c := st.NewFeed("c", nil)
			c.Deliver(items(0, 3)...)
			b.Close()
		})
		got := stage.FeedStats()
		if len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
			t.Fatalf("FeedStats %+v, want feeds a and c in that order", got)
		}
		if got[0].Delivered != 0 || got[1].Delivered != 3 || got[1].Granted != producer.DefaultFlowInitial {
			t.Fatalf("FeedStats %+v, want c alone to have 3 delivered, of %d granted", got, producer.DefaultFlowInitial)
		}
		src.steps <- func(*producer.Stage[item], *producer.RunHealth) error { return errors.New("boom") }
		synctest.Wait()
		if got := stage.FeedStats(); got != nil {
			t.Fatalf("FeedStats between runs %+v, want none", got)
		}
		time.Sleep(producer.DefaultRestartBackoff)
		stopFetching(h)
	})
}

// unchanged fails the test unless the stage's status is still before and
// no line saying logged was logged, after what.
func unchanged(t *testing.T, h *harness, before producer.StageStatus, lines func() []string, logged, after string) {
	t.Helper()
	if got := h.p.Status()[0]; got != before {
		t.Fatalf("status %+v after %s, want it unchanged: %+v", got, after, before)
	}
	if n := countLines(lines(), logged); n != 0 {
		t.Fatalf("%d %q lines after %s, want none: %q", n, logged, after, lines())
	}
}

// Guarantee: the goroutines that watch one run's broker may report it
// unreachable and reachable again at once, from several goroutines and
// while a health check reads the stage's status: the stage is degraded
// with one of their errors and one WARN line, then running with one INFO
// line.
func TestDegradeAndRecoveredFromSeveralGoroutinesAtOnceLogOneLineEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		src, h := startDegrading(t, log)
		src.do(func(st *producer.Stage[item], _ *producer.RunHealth) { st.NewFeed("p0", nil) })
		const watchers = 8
		errs := make([]error, watchers)
		for i := range errs {
			errs[i] = fmt.Errorf("broker %d unreachable", i)
		}
		atOnce := func(report func(rh *producer.RunHealth, i int)) {
			src.do(func(_ *producer.Stage[item], rh *producer.RunHealth) {
				var wg sync.WaitGroup
				for i := range watchers {
					wg.Go(func() { report(rh, i) })
					wg.Go(func() { _ = h.p.Status() })
				}
				wg.Wait()
			})
		}
		atOnce(func(rh *producer.RunHealth, i int) { rh.Degrade(errs[i]) })
		st := h.p.Status()[0]
		if st.State != producer.StateDegraded || !slices.ContainsFunc(errs, func(err error) bool { return errors.Is(st.LastError, err) }) {
			t.Fatalf("status %+v, want degraded with one of the watchers' errors", st)
		}
		if n := countLines(lines(), "WARN "+producer.DegradedLog); n != 1 {
			t.Fatalf("%d degraded lines, want 1: %q", n, lines())
		}
		atOnce(func(rh *producer.RunHealth, _ int) { rh.Recovered() })
		if got := h.p.Status()[0].State; got != producer.StateRunning {
			t.Fatalf("state %q, want running", got)
		}
		if n := countLines(lines(), "INFO "+producer.RecoveredLog); n != 1 {
			t.Fatalf("%d recovered lines, want 1: %q", n, lines())
		}
		stopFetching(h)
	})
}

// Guarantee: a source may close its feeds from several goroutines at once,
// each feed more than once, while a health check reads the stage's feed
// stats: every call returns, and the stats then list the open feed alone.
func TestFeedsClosedFromSeveralGoroutinesAtOnceLeaveTheOpenOnesListed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, h := startDegrading(t, nil)
		var stage *producer.Stage[item]
		src.do(func(st *producer.Stage[item], _ *producer.RunHealth) {
			stage = st
			var feeds []*producer.Feed[item]
			for i := range 8 {
				feeds = append(feeds, st.NewFeed(fmt.Sprint("p", i), nil))
			}
			st.NewFeed("kept", nil)
			var wg sync.WaitGroup
			for _, f := range feeds {
				wg.Go(f.Close)
				wg.Go(f.Close)
				wg.Go(func() { _ = st.FeedStats() })
			}
			wg.Wait()
		})
		if got := stage.FeedStats(); len(got) != 1 || got[0].Name != "kept" {
			t.Fatalf("FeedStats %+v, want the kept feed alone", got)
		}
		stopFetching(h)
	})
}
