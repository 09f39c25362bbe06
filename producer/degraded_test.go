package producer_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/producer"
)

// degradingSource is a source whose run connects (one feed) and then
// follows the steps the test sends it, each on the run's goroutine.
type degradingSource struct {
	producer.Basic
	steps chan func(st *producer.Stage[item])
	stage chan *producer.Stage[item]
}

func (s *degradingSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	select {
	case s.stage <- st:
	default:
	}
	for {
		select {
		case f := <-s.steps:
			f(st)
		case <-ctx.Done():
			return nil
		}
	}
}

// Guarantee: a source that reports its run cannot read from its broker
// moves the stage to degraded, with its error as LastError and one WARN
// line however often it reports it, and back to running, with one INFO
// line, when it reports that it reads again.
func TestDegradedStageSaysWhyAndRecoversWithOneLineEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &degradingSource{steps: make(chan func(*producer.Stage[item])), stage: make(chan *producer.Stage[item], 1)}
		log, lines := newLogRecorder()
		h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), log)
		step := func(f func(*producer.Stage[item])) {
			src.steps <- f
			synctest.Wait()
		}
		step(func(st *producer.Stage[item]) {
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
		step(func(st *producer.Stage[item]) { st.Degrade(errDown) })
		st := h.p.Status()[0]
		if st.State != producer.StateDegraded || !errors.Is(st.LastError, errDown) || st.ConsecutiveFailures != 0 {
			t.Fatalf("status %+v, want degraded with LastError %v and no failure", st, errDown)
		}
		since := st.Since
		time.Sleep(3 * time.Second)
		errAgain := errors.New("dial tcp 10.0.0.1:9092: connect: connection refused")
		for range 5 {
			step(func(st *producer.Stage[item]) { st.Degrade(errAgain) })
		}
		if st := h.p.Status()[0]; st.State != producer.StateDegraded || !st.Since.Equal(since) || !errors.Is(st.LastError, errAgain) {
			t.Fatalf("status %+v after more reports, want degraded since %v with the latest error", st, since)
		}
		if n := countLines(lines(), "WARN "+producer.DegradedLog); n != 1 {
			t.Fatalf("%d degraded lines, want 1: %q", n, lines())
		}
		step(func(st *producer.Stage[item]) { st.Recovered(); st.Recovered() })
		if st := h.p.Status()[0]; st.State != producer.StateRunning || !st.Since.After(since) {
			t.Fatalf("status %+v after recovery, want running since now", st)
		}
		if n := countLines(lines(), "INFO "+producer.RecoveredLog, "degraded=3s"); n != 1 {
			t.Fatalf("%d recovered lines saying degraded=3s, want 1: %q", n, lines())
		}
		h.p.StopFetching()
		synctest.Wait()
	})
}

// Guarantee: a run degraded before it created a feed goes back to
// connecting, not running, when it recovers, and a feed created while it
// is degraded leaves it degraded until its source says it reads again.
func TestDegradedBeforeTheFirstFeedRecoversToItsRunsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &degradingSource{steps: make(chan func(*producer.Stage[item])), stage: make(chan *producer.Stage[item], 1)}
		h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), nil)
		state := func() producer.State { return h.p.Status()[0].State }
		src.steps <- func(st *producer.Stage[item]) { st.Degrade(nil); st.Recovered() }
		synctest.Wait()
		if got := state(); got != producer.StateConnecting {
			t.Fatalf("state %q after a recovery before any feed, want connecting", got)
		}
		src.steps <- func(st *producer.Stage[item]) { st.Degrade(nil); st.NewFeed("p0", nil) }
		synctest.Wait()
		if st := h.p.Status()[0]; st.State != producer.StateDegraded || !errors.Is(st.LastError, producer.ErrUnreachable) {
			t.Fatalf("status %+v, want degraded with ErrUnreachable after a feed created while degraded", st)
		}
		src.steps <- func(st *producer.Stage[item]) { st.Recovered() }
		synctest.Wait()
		if got := state(); got != producer.StateRunning {
			t.Fatalf("state %q, want running", got)
		}
		h.p.StopFetching()
		synctest.Wait()
	})
}

// Guarantee: a report from outside a Run (a goroutine of the source
// that outlived it) does not move the stage out of the state the end of
// the run gave it.
func TestDegradeOutsideARunChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &degradingSource{steps: make(chan func(*producer.Stage[item])), stage: make(chan *producer.Stage[item], 1)}
		h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), nil)
		st := <-src.stage
		h.p.StopFetching()
		synctest.Wait()
		st.Degrade(errors.New("late"))
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
		src := &degradingSource{steps: make(chan func(*producer.Stage[item])), stage: make(chan *producer.Stage[item], 1)}
		log, lines := newLogRecorder()
		h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), log)
		src.steps <- func(st *producer.Stage[item]) { st.Degrade(nil); st.Recovered() }
		synctest.Wait()
		if n := countLines(lines(), "INFO "+producer.RecoveredLog, "state=connecting"); n != 1 {
			t.Fatalf("%d recovered lines saying state=connecting, want 1: %q", n, lines())
		}
		src.steps <- func(st *producer.Stage[item]) { st.NewFeed("p0", nil); st.Degrade(nil); st.Recovered() }
		synctest.Wait()
		if n := countLines(lines(), "INFO "+producer.RecoveredLog, "state=running"); n != 1 {
			t.Fatalf("%d recovered lines saying state=running, want 1: %q", n, lines())
		}
		h.p.StopFetching()
		synctest.Wait()
	})
}
