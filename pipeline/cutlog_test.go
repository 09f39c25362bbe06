package pipeline_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// cutLine is in the line the pipeline logs when it cuts its drain short.
const cutLine = "shutdown timeout passed"

// Guarantee: a drain cut short, by the shutdown timeout or by Stop's
// context, is logged once, when it is cut (before Stop's deadline), and a
// drain that completes is not logged as cut.
func TestADrainCutShortIsLoggedOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stuck   bool
		timeout time.Duration
		stopBy  time.Duration
		want    int
	}{
		{"by the shutdown timeout", true, time.Second, time.Minute, 1},
		{"by Stop's context", true, time.Minute, 2 * time.Second, 1},
		{"never, as it completes", false, time.Minute, 2 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				started, release, unblock := stuckGate()
				defer unblock()
				var lines logtest.Lines
				p := mustNew(t, pipeline.Options[uint64, uint64]{
					Name:            "cut",
					ShutdownTimeout: tc.timeout,
					Logger:          slog.New(slog.NewTextHandler(&lines, nil)),
					Processors:      processor.Options[uint64, uint64]{Concurrency: 1, MaxDemand: 1, Handle: stuckHandler(started, release)},
				})
				if err := p.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				v := uint64(2)
				if tc.stuck {
					v = 1
				}
				if err := p.Push(context.Background(), message.New[uint64](v, nil, v)); err != nil {
					t.Fatal(err)
				}
				if tc.stuck {
					<-started
				}
				deadline := time.Now().Add(tc.stopBy)
				_ = stopWithin(t, p, tc.stopBy)
				unblock()
				<-p.Done()
				if got := lines.Count(cutLine); got != tc.want {
					t.Fatalf("a drain cut short %s: %q logged %d times, want %d; log:\n%v", tc.name, cutLine, got, tc.want, lines.All())
				}
				for _, line := range lines.Matching(cutLine) {
					stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
					at, err := time.Parse(time.RFC3339Nano, stamp)
					if err != nil {
						t.Fatalf("log line %q: %v", line, err)
					}
					if !at.Before(deadline) {
						t.Errorf("a drain cut short %s was logged so %v after Stop's deadline, not when it was cut", tc.name, at.Sub(deadline))
					}
				}
			})
		})
	}
}
