package kafka_test

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/safehooks"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Guarantee: a Kafka source whose PartitionAssigned and PartitionRevoked
// hooks panic, or end their goroutine (runtime.Goexit, as t.FailNow does),
// logs one error line per call naming the hook (an exit with its stack) and
// goes on as if the hook had returned: every record is handled, what was
// handled is committed, each partition assigned is revoked, and Stop
// returns by its deadline.
func TestPartitionHookPanicOrGoexitIsLoggedOnceAndTheSourceGoesOn(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		for _, tc := range []struct {
			name string
			end  func()
			msg  string
		}{
			{"panic", func() { panic("hook") }, safehooks.Panicked},
			{"goexit", runtime.Goexit, safehooks.Exited},
		} {
			t.Run(tc.name, func(t *testing.T) {
				const parts = 2
				group := "g-hook-" + tc.name
				c := newCluster(t, parts)
				ends := produce(t, c, parts, 0, 20)
				l := newLedger()
				logs := &logtest.Lines{}
				var assigned, revoked atomic.Int32
				opts := sourceOptions(c, group)
				opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
				opts.Telemetry = &telemetry.Hooks{
					PartitionAssigned: func(context.Context, telemetry.Assignment) { assigned.Add(1); tc.end() },
					PartitionRevoked:  func(context.Context, telemetry.Assignment) { revoked.Add(1); tc.end() },
				}
				p := startPipeline(t, pipelineOpts("p", cl.new(t, opts), 1, l, nil))
				wait.Within(t, 20*time.Second, "every record handled", func() bool { return l.covers(ends) })

				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				stopped := make(chan error, 1)
				go func() { stopped <- p.Stop(ctx) }()
				select {
				case err := <-stopped:
					if err != nil {
						t.Fatalf("stop: %v", err)
					}
				case <-time.After(15 * time.Second):
					t.Fatal("Stop did not return by its deadline (10s)")
				}
				if got := committed(c, group); !equalOffsets(got, ends) {
					t.Errorf("committed %v, want %v", got, ends)
				}
				a, r := assigned.Load(), revoked.Load()
				if a < parts || r != a {
					t.Errorf("%d partitions assigned, %d revoked; want at least %d, each revoked", a, r, parts)
				}
				lines := logs.Matching(tc.msg)
				if len(lines) != int(a+r) {
					t.Errorf("%d lines %q logged for %d hook calls, want one each:\n%s", len(lines), tc.msg, a+r, strings.Join(logs.All(), ""))
				}
				for _, line := range lines {
					if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "hook=Partition") {
						t.Errorf("log line %q: want an error naming the hook", line)
					}
					if tc.name == "goexit" && !strings.Contains(line, "runtime.Goexit") {
						t.Errorf("log line %q: want the stack of the exit", line)
					}
				}
			})
		}
	})
}
