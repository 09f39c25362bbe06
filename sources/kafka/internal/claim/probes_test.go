package claim

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
)

// Guarantee: a connection check whose brokers refuse connections at once
// does not fail at once: it logs one WARN line naming the brokers and the
// cause, tries again with a growing backoff, and either succeeds when a
// broker answers or fails with ErrConnect once the connect timeout has
// passed, as a check against brokers that never answer does; an error
// that is final (refused credentials) ends it at once.
func TestAConnectionCheckRefusedAtOnceTriesAgainUntilItsTimeout(t *testing.T) {
	refused := func(string) error { return syscall.ECONNREFUSED }
	check := func(probe func(string) error, final func(error) bool) (took time.Duration, lines *logtest.Lines, err error) {
		lines = &logtest.Lines{}
		var ps Probes
		var mu sync.Mutex
		closed := false
		start := time.Now()
		err = ps.Check(context.Background(), &mu, &closed, []string{"a:9092", "b:9092"}, 10*time.Second,
			slog.New(slog.NewTextHandler(lines, nil)), final, func(_ context.Context, addr string) error { return probe(addr) })
		took = time.Since(start)
		ps.Wait(context.Background())
		return took, lines, err
	}
	notFinal := func(error) bool { return false }

	t.Run("refused until the timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var rounds atomic.Int32
			took, lines, err := check(func(addr string) error {
				if addr == "a:9092" {
					rounds.Add(1)
				}
				return refused(addr)
			}, notFinal)
			if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), `"b:9092"`) {
				t.Errorf("Check = %v, want ErrConnect naming every broker", err)
			}
			if took != 10*time.Second {
				t.Errorf("Check failed after %v, want its timeout, 10s", took)
			}
			// Rounds at 0, 0.25, 0.75, 1.75, 3.75, 5.75, 7.75, 9.75 and, the
			// backoff cut to what is left, 10 s.
			if n := rounds.Load(); n != 9 {
				t.Errorf("%d rounds, want 9", n)
			}
			lines.Want(t, 1, "WARN lines of a check tried again", ProbeRetryLog, "level=WARN", "a:9092", "connection refused")
		})
	})
	t.Run("refused, then answered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var n atomic.Int32
			took, lines, err := check(func(addr string) error {
				if addr == "b:9092" && n.Add(1) >= 3 {
					return nil
				}
				return refused(addr)
			}, notFinal)
			if err != nil || took != 750*time.Millisecond {
				t.Errorf("Check = %v after %v, want nil after 0.25 + 0.5 s of backoff", err, took)
			}
			lines.Want(t, 1, "WARN lines of a check tried again", ProbeRetryLog)
		})
	})
	t.Run("final", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			denied := errors.New("SASL authentication failed")
			took, lines, err := check(func(string) error { return denied }, func(err error) bool { return errors.Is(err, denied) })
			if !errors.Is(err, denied) || took != 0 {
				t.Errorf("Check = %v after %v, want the final error at once", err, took)
			}
			lines.Want(t, 0, "WARN lines of a check that ended at once", ProbeRetryLog)
		})
	})
}

// Guarantee: once a connection check has its answer, a broker that
// answered or its ctx that ended, the probes still waiting on a broker
// that never answers are ended at once, without waiting for Wait or the
// connect timeout: they would only hold their connections.
func TestAConnectionCheckEndsItsProbesStillWaitingOnceItHasItsAnswer(t *testing.T) {
	for name, answered := range map[string]bool{"another broker answered": true, "its ctx ended": false} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ps Probes
				var mu sync.Mutex
				closed := false
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var waiting sync.WaitGroup
				waiting.Add(1)
				var ended atomic.Bool
				probe := func(pctx context.Context, addr string) error {
					if addr == "a:9092" && answered {
						return nil
					}
					if addr == "b:9092" {
						waiting.Done()
					}
					<-pctx.Done() // a broker that never answers
					if addr == "b:9092" {
						ended.Store(true)
					}
					return pctx.Err()
				}
				if !answered {
					go func() {
						waiting.Wait()
						cancel()
					}()
				}
				start := time.Now()
				err := ps.Check(ctx, &mu, &closed, []string{"a:9092", "b:9092"}, time.Minute, slog.New(slog.DiscardHandler),
					func(error) bool { return false }, probe)
				if err != nil || time.Since(start) != 0 {
					t.Fatalf("Check = %v after %v, want nil at once", err, time.Since(start))
				}
				synctest.Wait()
				if !ended.Load() {
					t.Errorf("the probe waiting on the silent broker still runs once the check returned, want it ended")
				}
				done, end := context.WithCancel(context.Background())
				end() // ends what still runs
				ps.Wait(done)
			})
		})
	}
}
