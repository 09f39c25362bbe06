package franz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// groupErrors is a log handler that counts the group errors the member's
// poll loop reads (its "kafka consumer error" lines without a topic).
type groupErrors struct{ n atomic.Int32 }

func (g *groupErrors) Enabled(context.Context, slog.Level) bool { return true }

func (g *groupErrors) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "kafka consumer error" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "topic" && a.Value.String() == "" {
			g.n.Add(1)
			return false
		}
		return true
	})
	return nil
}

func (g *groupErrors) WithAttrs([]slog.Attr) slog.Handler { return g }
func (g *groupErrors) WithGroup(string) slog.Handler      { return g }

// runOnceSource is a source whose Run runs once: its error goes to done,
// and the pipeline sees it return nil, so that it does not restart it.
type runOnceSource struct {
	*Source
	done chan error
}

func (s runOnceSource) Run(ctx context.Context, st *producer.Stage[[]byte]) error {
	s.done <- s.Source.Run(ctx, st)
	return nil
}

// Guarantee: Run fails with an error wrapping ErrConsume once the member
// has read maxConsumeFailures group errors in a row, and not before: a
// record fetched between two of them starts the count again. Here each
// group error is a heartbeat answered ILLEGAL_GENERATION (the member
// loses its session and joins again), made only once the member has read
// the one before; every record is committed as it is handled, so that a
// new session fetches nothing but the records written for it.
func TestRunFailsAfterMaxConsumeFailuresGroupErrorsInARowOnly(t *testing.T) {
	const topic, group = "events", "g-consume-failures"
	c := groupCluster(t, topic, 1)
	var handled atomic.Int64
	errs := &groupErrors{}
	src := groupSource(t, c, topic, group, func(o *Options) {
		o.CommitMode, o.Logger = CommitOnAck, slog.New(errs)
	})
	done := make(chan error, 1)
	startPipeline(t, pipeline.Options[[]byte, []byte]{
		Name:            "consume-failures",
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[[]byte]{Source: runOnceSource{src, done}},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				handled.Add(1)
				return m.Data, nil
			},
		},
	})
	var runErr error
	returned := func() bool {
		if runErr != nil {
			return true
		}
		select {
		case runErr = <-done:
			if runErr == nil {
				runErr = errors.New("<nil>")
			}
			return true
		default:
			return false
		}
	}
	readAndCommitted := func(n int64) {
		t.Helper()
		wait.For(t, fmt.Sprintf("record %d handled and committed", n), func() bool {
			return handled.Load() >= n && committedOffset(c, group, topic) == n
		}, func() string {
			return fmt.Sprintf("%d handled, committed %d", handled.Load(), committedOffset(c, group, topic))
		})
	}
	readAndCommitted(1)
	lose := answerNextHeartbeat(c, group, kerr.IllegalGeneration.Code, nil)
	// fail makes n group errors in a row, each once the member read the
	// one before; Run must still run after each.
	fail := func(n int, after string) {
		t.Helper()
		for i := range n {
			want := errs.n.Load() + 1
			lose()
			wait.For(t, "the member to read the group error", func() bool { return errs.n.Load() >= want || returned() })
			if returned() {
				t.Fatalf("Run = %v by group error %d in a row %s, want it running until %d in a row",
					runErr, i+1, after, maxConsumeFailures)
			}
		}
	}
	fail(maxConsumeFailures-1, "from its start")
	produce(t, c, topic, 0, "between")
	readAndCommitted(2)
	fail(maxConsumeFailures-1, "after a record")
	// One more in a row fails Run.
	lose()
	wait.For(t, fmt.Sprintf("Run to fail after %d group errors in a row", maxConsumeFailures), returned,
		func() string { return fmt.Sprintf("%d group errors read", errs.n.Load()) })
	if !errors.Is(runErr, ErrConsume) || !errors.Is(runErr, kerr.IllegalGeneration) {
		t.Fatalf("Run = %v, want an error wrapping ErrConsume and ILLEGAL_GENERATION", runErr)
	}
}
