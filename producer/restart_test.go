package producer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/producer"
)

// sleepCtx waits d (fake time in a bubble) or until ctx ends, and reports
// whether the full d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// giveUp waits, at most limit of (fake) time, for the producer to finish
// and returns its single fatal error as a *RestartError.
func giveUp(t *testing.T, h *harness, limit time.Duration) *producer.RestartError {
	t.Helper()
	select {
	case <-h.p.Done():
	case <-time.After(limit):
		t.Fatalf("the stage still restarts its source after %v", limit)
	}
	fatals := h.fatalErrs()
	if len(fatals) != 1 {
		t.Fatalf("fatal called %d times (%v), want once", len(fatals), fatals)
	}
	var re *producer.RestartError
	if !errors.As(fatals[0], &re) || !errors.Is(fatals[0], producer.ErrTooManyRestarts) {
		t.Fatalf("fatal error %v, want a *RestartError wrapping ErrTooManyRestarts", fatals[0])
	}
	return re
}

// Guarantee: a source that can never connect, each attempt failing only
// after a timeout longer than the restart window can see, is given up after
// MaxConsecutiveFailures attempts (default 5): Run does not restart it
// forever.
func TestSlowFailuresGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errTimeout := errors.New("dial tcp 10.0.0.1:9092: i/o timeout")
		src := &scriptedSource{run: func(ctx context.Context, _ *producer.Stage[item], _ int) error {
			if !sleepCtx(ctx, 3*time.Second) {
				return ctx.Err()
			}
			return errTimeout
		}}
		h := start(t, "orders", producer.Options[item]{Source: src}, newRecorder(), nil)
		re := giveUp(t, h, time.Hour)
		if re.Rule != producer.RuleMaxConsecutiveFailures || re.ConsecutiveFailures != producer.DefaultMaxConsecutiveFailures {
			t.Errorf("RestartError = %+v, want rule %s after %d failures", re, producer.RuleMaxConsecutiveFailures, producer.DefaultMaxConsecutiveFailures)
		}
		if n := src.calls(); n != producer.DefaultMaxConsecutiveFailures {
			t.Errorf("Run called %d times, want %d", n, producer.DefaultMaxConsecutiveFailures)
		}
		if !errors.Is(re, errTimeout) || re.Stage != "orders.producer.0" {
			t.Errorf("RestartError = %+v, want stage orders.producer.0 and the last error", re)
		}
		for _, want := range []string{`"orders.producer.0"`, "5 runs in a row", "restart.maxConsecutiveFailures", errTimeout.Error()} {
			if !strings.Contains(re.Error(), want) {
				t.Errorf("error %q does not say %q", re, want)
			}
		}
	})
}

// Guarantee: a stage that spends MaxFailingTime failing without delivering
// (attempts that never connect, and the backoffs between them) gives up,
// even before MaxConsecutiveFailures attempts; the error says how long.
func TestFailingTimeGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{run: func(ctx context.Context, _ *producer.Stage[item], _ int) error {
			if !sleepCtx(ctx, 50*time.Second) {
				return ctx.Err()
			}
			return errors.New("subscribe: operation timed out")
		}}
		h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxConsecutiveFailures: 100}}, newRecorder(), nil)
		re := giveUp(t, h, time.Hour)
		// 50s + 100ms backoff + 50s + 200ms backoff + 50s ≥ 2m.
		const want = 150*time.Second + 300*time.Millisecond
		if re.Rule != producer.RuleMaxFailingTime || re.Failing != want || re.ConsecutiveFailures != 3 {
			t.Errorf("RestartError = %+v, want rule %s after %v failing and 3 failures", re, producer.RuleMaxFailingTime, want)
		}
		if !strings.Contains(re.Error(), "failing for 2m30.3s") {
			t.Errorf("error %q does not say how long the stage was failing", re)
		}
	})
}

// Guarantee: a run that delivered a message, even one that then failed,
// resets the count of consecutive failures and the failing time.
func TestDeliveringRunResetsConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
			if call == 10 {
				<-ctx.Done()
				return ctx.Err()
			}
			if call == 5 {
				f := st.NewFeed("p0", nil)
				f.Deliver(items(0, 1)...)
			}
			if !sleepCtx(ctx, 3*time.Second) {
				return ctx.Err()
			}
			return fmt.Errorf("connection reset (%d)", call)
		}}
		h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), nil)
		for src.calls() < 10 {
			synctest.Wait()
			if isClosed(h.p.Done()) {
				t.Fatalf("the stage gave up (%v) though run 5 delivered a message", h.fatalErrs())
			}
			time.Sleep(time.Second)
		}
		if st := h.p.Status()[0]; st.ConsecutiveFailures != 4 || st.Restarts != 9 {
			t.Errorf("status %+v, want 4 consecutive failures (runs 6-9) after 9 restarts", st)
		}
		h.p.StopFetching()
		synctest.Wait()
		if errs := h.fatalErrs(); len(errs) != 0 {
			t.Errorf("fatal called with %v", errs)
		}
	})
}

// Guarantee: time a run spent connected (with a feed) does not count as
// failing: a source on an idle topic whose connection breaks now and then
// after a long time is restarted, not given up.
func TestConnectedTimeIsNotFailingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
			st.NewFeed("p0", nil)
			if call > 3 || !sleepCtx(ctx, 10*time.Minute) {
				<-ctx.Done()
				return ctx.Err()
			}
			return errors.New("connection reset by peer")
		}}
		h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), nil)
		for src.calls() < 4 && !isClosed(h.p.Done()) {
			time.Sleep(time.Minute)
		}
		synctest.Wait()
		if errs := h.fatalErrs(); len(errs) != 0 {
			t.Fatalf("fatal called with %v for a source that was connected for 10 minutes each run", errs)
		}
		if st := h.p.Status()[0]; st.State != producer.StateRunning || st.ConsecutiveFailures != 3 {
			t.Errorf("status %+v, want running after 3 failures in a row", st)
		}
		h.p.StopFetching()
	})
}

// Guarantee: the backoff doubles with each consecutive failure even when the
// failures are further apart than Window, and never exceeds MaxBackoff,
// however many failures there were.
func TestBackoffDoublesWithConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const runs = 70
		src := &scriptedSource{run: func(ctx context.Context, _ *producer.Stage[item], call int) error {
			if call > runs || !sleepCtx(ctx, 6*time.Second) {
				<-ctx.Done()
				return ctx.Err()
			}
			return errors.New("refused")
		}}
		rs := producer.Restart{Backoff: 100 * time.Millisecond, MaxBackoff: time.Minute, MaxConsecutiveFailures: runs + 1, MaxFailingTime: 24 * time.Hour}
		h := start(t, "p", producer.Options[item]{Source: src, Restart: rs}, newRecorder(), nil)
		for src.calls() <= runs && !isClosed(h.p.Done()) {
			time.Sleep(time.Minute)
		}
		synctest.Wait()
		if errs := h.fatalErrs(); len(errs) != 0 {
			t.Fatalf("fatal called with %v", errs)
		}
		gaps := src.gaps()
		if len(gaps) != runs {
			t.Fatalf("%d restarts, want %d", len(gaps), runs)
		}
		want := rs.Backoff
		for i, g := range gaps {
			if g != want {
				t.Fatalf("restart %d came %v after the failure, want %v", i+1, g, want)
			}
			want = min(2*want, rs.MaxBackoff)
		}
		h.p.StopFetching()
	})
}

// Guarantee: a fast-failing source still gives up under the sliding window
// (more than MaxRestarts failures within Window) and says so, with the
// consecutive-failure default raised so it never trips first.
func TestWindowRuleNamedInError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{run: func(context.Context, *producer.Stage[item], int) error {
			return errors.New("bad credentials")
		}}
		h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 8, Window: time.Hour}}, newRecorder(), nil)
		re := giveUp(t, h, 24*time.Hour)
		if re.Rule != producer.RuleMaxRestarts || re.Restarts != 8 || re.ConsecutiveFailures != 9 {
			t.Errorf("RestartError = %+v, want rule %s after 8 restarts", re, producer.RuleMaxRestarts)
		}
		if !strings.Contains(re.Error(), "8 restarts within 1h0m0s; restart.maxRestarts") {
			t.Errorf("error %q does not name the window rule", re)
		}
	})
}

// Guarantee: a failure counts in the sliding Window until Window has
// passed since it: failures exactly Window apart never add up, failures
// less than that apart do.
func TestAFailureLeavesTheWindowOnceWindowHasPassed(t *testing.T) {
	for _, c := range []struct {
		name    string
		backoff time.Duration
		giveUp  bool
	}{
		{"a Window apart", time.Second, false},
		{"just under a Window apart", time.Second - time.Nanosecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Each run fails at once, so failures are exactly the
				// backoff apart.
				src := &scriptedSource{run: func(context.Context, *producer.Stage[item], int) error {
					return errors.New("connection reset")
				}}
				h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 1, Window: time.Second,
					Backoff: c.backoff, MaxBackoff: c.backoff, MaxConsecutiveFailures: 1000, MaxFailingTime: 24 * time.Hour}}, newRecorder(), nil)
				if c.giveUp {
					if re := giveUp(t, h, time.Minute); re.Rule != producer.RuleMaxRestarts || re.Restarts != 1 {
						t.Errorf("RestartError = %+v, want rule %s after 1 restart", re, producer.RuleMaxRestarts)
					}
					return
				}
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if n := src.calls(); n < 10 {
					t.Errorf("%d runs in 10s of failures a second apart, want at least 10", n)
				}
				if errs := h.fatalErrs(); len(errs) != 0 {
					t.Errorf("fatal called with %v for failures a Window apart", errs)
				}
				h.p.StopFetching()
				waitDone(t, h)
			})
		})
	}
}

// Guarantee: a RestartError's message is one line, even when the source's
// error spans several (errors.Join).
func TestRestartErrorIsOneLine(t *testing.T) {
	last := errors.Join(errors.New("context deadline exceeded"), errors.New("connection error"))
	re := &producer.RestartError{Stage: "p.producer.0", Rule: producer.RuleMaxConsecutiveFailures, ConsecutiveFailures: 5, Last: last}
	msg := re.Error()
	if strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, "context deadline exceeded; connection error") {
		t.Fatalf("error %q, want one line joining the source's error lines with \"; \"", msg)
	}
	if !errors.Is(re, last) {
		t.Fatalf("%v does not wrap the last error", re)
	}
}

// Guarantee: each failed run is logged once, at WARN, with the source's
// error, the failure counts, the failing time and the backoff; giving up is
// logged once, at ERROR.
func TestFailedRunLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, records := newLogRecorder()
		src := &scriptedSource{script: func(ctx context.Context, _ int) error {
			if !sleepCtx(ctx, 10*time.Second) {
				return ctx.Err()
			}
			return errors.New("dial tcp 192.0.2.1:9092: i/o timeout")
		}}
		h := start(t, "orders", producer.Options[item]{Source: src, Restart: producer.Restart{MaxConsecutiveFailures: 2}}, newRecorder(), log)
		giveUp(t, h, time.Hour)
		var warns, errs []string
		for _, r := range records() {
			switch {
			case strings.HasPrefix(r, "WARN "):
				warns = append(warns, r)
			case strings.HasPrefix(r, "ERROR "):
				errs = append(errs, r)
			}
		}
		want := `WARN source failed; restarting stage=orders.producer.0 error=dial tcp 192.0.2.1:9092: i/o timeout failures_in_window=1 consecutive_failures=1 failing=10s backoff=100ms`
		if len(warns) != 1 || warns[0] != want {
			t.Errorf("WARN lines %q, want one: %q", warns, want)
		}
		if len(errs) != 1 || !strings.HasPrefix(errs[0], "ERROR producer stage gave up stage=orders.producer.0 error=") {
			t.Errorf("ERROR lines %q, want one saying the stage gave up", errs)
		}
	})
}

// Guarantee: the status's ConsecutiveFailures drops to 0 as soon as a run
// delivers a message, while that run goes on.
func TestStatusFailuresDropToZeroAtTheFirstDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
			if call < 3 {
				return fmt.Errorf("connection refused (%d)", call)
			}
			f := st.NewFeed("p0", nil)
			f.Deliver(items(0, 1)...)
			<-ctx.Done()
			return ctx.Err()
		}}
		h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), nil)
		for src.calls() < 3 {
			synctest.Wait()
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if st := h.p.Status()[0]; st.ConsecutiveFailures != 0 || st.Restarts != 2 || st.State != producer.StateRunning {
			t.Errorf("status %+v, want 0 consecutive failures in the running third run after 2 restarts", st)
		}
		h.p.StopFetching()
		waitDone(t, h)
	})
}

// pausingHandler is a slog.Handler that holds up the goroutine logging a
// record whose message contains pause: it closes entered and waits for
// release.
type pausingHandler struct {
	pause            string
	entered, release chan struct{}
}

func (h pausingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h pausingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h pausingHandler) WithGroup(string) slog.Handler            { return h }
func (h pausingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.pause) {
		close(h.entered)
		<-h.release
	}
	return nil
}

// Guarantee: a message that a feed of an earlier run delivers while a
// later run goes on (a delivery under way when that feed closed) does not
// count as the later run's progress: that run failing is one more
// consecutive failure.
func TestLateDeliveryOfAnEarlierRunIsNotTheCurrentRunsProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := pausingHandler{pause: "delivered more messages than it was granted", entered: make(chan struct{}), release: make(chan struct{})}
		run2, late := make(chan struct{}), make(chan struct{})
		src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
			switch call {
			case 1:
				f := st.NewFeed("p0", nil)
				go func() {
					// One more than the window: the warning holds this
					// delivery up after its feed's closed check.
					f.Deliver(items(0, producer.DefaultFlowInitial+1)...)
					close(late)
				}()
				<-h.entered
				return errors.New("connection reset (1)")
			case 2:
				close(run2)
				<-late
				return errors.New("connection reset (2)")
			}
			<-ctx.Done()
			return ctx.Err()
		}}
		p := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), slog.New(h))
		<-run2
		close(h.release)
		for src.calls() < 3 {
			synctest.Wait()
			time.Sleep(time.Second)
		}
		if st := p.p.Status()[0]; st.ConsecutiveFailures != 2 {
			t.Errorf("status %+v, want 2 consecutive failures: run 2 delivered nothing of its own", st)
		}
		p.p.StopFetching()
		waitDone(t, p)
	})
}

// Guarantee: a run that delivered a message, even one that then failed,
// resets the failing time, and the stage gives up once the failing time
// since then reaches MaxFailingTime exactly, its status counting the
// failures of the streak that tripped the rule.
func TestDeliveringRunResetsFailingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
			if call == 3 {
				st.NewFeed("p0", nil).Deliver(items(0, 1)...)
			}
			if !sleepCtx(ctx, 50*time.Second) {
				return ctx.Err()
			}
			return errors.New("subscribe: operation timed out")
		}}
		// Runs 4 to 6 fail after 50s each, with backoffs of 100ms and 200ms
		// between them.
		const failing = 150*time.Second + 300*time.Millisecond
		h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{
			MaxConsecutiveFailures: 100, MaxFailingTime: failing}}, newRecorder(), nil)
		re := giveUp(t, h, time.Hour)
		if re.Rule != producer.RuleMaxFailingTime || re.Failing != failing || re.ConsecutiveFailures != 3 || src.calls() != 6 {
			t.Errorf("RestartError = %+v after %d runs, want rule %s after %v failing in runs 4-6",
				re, src.calls(), producer.RuleMaxFailingTime, failing)
		}
		if st := h.p.Status()[0]; st.State != producer.StateFailed || st.ConsecutiveFailures != 3 {
			t.Errorf("status %+v, want failed after 3 consecutive failures", st)
		}
	})
}

// Guarantee: a stage stopped while it waits, after the backoff, for the
// failed run's messages to leave the stage buffer (the processors are
// stalled) ends in StateStopped at once, without running its source
// again: that wait is bounded by the stop, not by the processors.
func TestStopWhileTheFailedRunsMessagesWaitEndsStopped(t *testing.T) {
	src := &scriptedSource{run: func(_ context.Context, st *producer.Stage[item], _ int) error {
		st.NewFeed("f", nil).Deliver(items(0, 3)...)
		return errors.New("connection reset")
	}}
	rec := newRecorder()
	release, blocked := rec.hold()
	defer release()
	h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{Backoff: time.Millisecond}}, rec, nil)
	wait.For(t, "the dispatcher to block on the stalled processors", func() bool { return blocked.Load() > 0 })
	wait.For(t, "the stage to wait for its restart", func() bool { return h.p.Status()[0].State == producer.StateRestarting })
	h.p.StopFetching()
	wait.For(t, "the stage to stop while the processors are still stalled", func() bool {
		return h.p.Status()[0].State == producer.StateStopped
	}, func() string { return fmt.Sprintf("state %q", h.p.Status()[0].State) })
	if n := src.calls(); n != 1 {
		t.Fatalf("source run %d times, want once: the stop came before the restart", n)
	}
	release()
	waitDone(t, h)
}

// Guarantee: a stage stopped while it waits out a restart backoff ends in
// StateStopped, without running its source again.
func TestStopDuringTheBackoffEndsStopped(t *testing.T) {
	src := &scriptedSource{script: func(context.Context, int) error { return errors.New("connection reset") }}
	h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{Backoff: time.Hour}}, newRecorder(), nil)
	wait.For(t, "the stage to wait for its restart", func() bool { return h.p.Status()[0].State == producer.StateRestarting })
	h.p.StopFetching()
	waitDone(t, h)
	if st := h.p.Status()[0]; st.State != producer.StateStopped || src.calls() != 1 {
		t.Fatalf("status %+v after %d runs, stopped during the backoff; want stopped after 1 run", st, src.calls())
	}
}
