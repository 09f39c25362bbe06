package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// closedBackoff is the restart backoff of closedRig's pipelines.
const closedBackoff = time.Second

// closedRig declares top on m and starts a pipeline reading it, logging
// to lines, that gives up on its source after two failed runs with
// closedBackoff between them; it publishes n letters and waits until they
// are all acked.
func closedRig(t *testing.T, m *topology.Memory[int], top *topology.Topology, lines *logtest.Lines, n int) (*pipeline.Pipeline[int, int], *topology.Source[int]) {
	t.Helper()
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:   "closed",
		Logger: slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Producer: producer.Options[int]{Source: src, Restart: producer.Restart{
			MaxRestarts: 1, Window: time.Hour, Backoff: closedBackoff, MaxBackoff: closedBackoff,
		}},
		Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled.Add(1)
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, time.Minute, "the subscription", func() bool { return src.Stats().Subscriptions > 0 })
	opts := topology.PublisherOptions[int]{}
	if top.Name() == "seq" {
		opts.Key = func(v int) string { return string(rune('a' + v%3)) }
	}
	pub, err := topology.NewPublisher(q, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := pub.Publish(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, time.Minute, "the letters acked", func() bool { return src.Stats().Acked == uint64(n) && handled.Load() == int64(n) })
	return p, src
}

func closedTopologies(t *testing.T) []*topology.Topology {
	t.Helper()
	var tops []*topology.Topology
	for _, b := range []*topology.Builder{
		topology.New("bal").DLQ(),
		topology.New("bc").Broadcast(),
		topology.New("seq").Sequenced(topology.Skip).DLQ(),
	} {
		top, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		tops = append(tops, top)
	}
	return tops
}

// Guarantee: a backend closed under a running pipeline is a failure of
// its topology source, not an end of stream: the run ends with an error
// matching topology.ErrClosed, the one restart fails at once (the
// subscribe is refused), so that the stage gives up after one backoff,
// failed with that error, and the pipeline stops with a
// *producer.RestartError matching it; the source is never logged as
// exhausted.
func TestBackendClosedUnderThePipelineFailsItsStage(t *testing.T) {
	for _, top := range closedTopologies(t) {
		t.Run(top.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, _ := topology.NewMemory[int](topology.MemoryOptions{})
				var lines logtest.Lines
				p, _ := closedRig(t, m, top, &lines, 10)
				closedAt := time.Now()
				if err := m.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				<-p.Done()
				if took := time.Since(closedAt); took > closedBackoff {
					t.Errorf("the pipeline stopped %v after its backend closed, want within the one backoff (%v)", took, closedBackoff)
				}
				var re *producer.RestartError
				if err := p.Err(); !errors.As(err, &re) || !errors.Is(err, topology.ErrClosed) {
					t.Fatalf("Err = %v, want a *producer.RestartError matching topology.ErrClosed", err)
				}
				st := p.SourceStatus()[0]
				if st.State != producer.StateFailed || !errors.Is(st.LastError, topology.ErrClosed) {
					t.Fatalf("stage status %+v, want failed with an error matching topology.ErrClosed", st)
				}
				if n := lines.Count("source exhausted"); n != 0 {
					t.Fatalf("%d lines say the source is exhausted, want none:\n%v", n, lines.All())
				}
				if n := lines.Count("source failed; restarting", "topology: closed"); n != 1 {
					t.Fatalf("%d restart lines naming the closed backend, want 1:\n%v", n, lines.All())
				}
			})
		})
	}
}

// Guarantee: a pipeline stopped before its backend is closed stops
// cleanly: no WARN or ERROR line and no "source exhausted", the stage ends
// stopped with no error, and Err returns nil.
func TestStopBeforeTheBackendClosesLogsNoError(t *testing.T) {
	for _, top := range closedTopologies(t) {
		t.Run(top.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, _ := topology.NewMemory[int](topology.MemoryOptions{})
				var lines logtest.Lines
				p, _ := closedRig(t, m, top, &lines, 10)
				if err := p.Stop(t.Context()); err != nil {
					t.Fatalf("Stop = %v", err)
				}
				if err := m.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := p.Err(); err != nil {
					t.Fatalf("Err after a clean Stop = %v, want nil", err)
				}
				if st := p.SourceStatus()[0]; st.State != producer.StateStopped || st.LastError != nil {
					t.Fatalf("stage status %+v, want stopped with no error", st)
				}
				if n := lines.Count("level=WARN") + lines.Count("level=ERROR") + lines.Count("source exhausted"); n != 0 {
					t.Fatalf("a clean Stop logged %d WARN, ERROR or \"source exhausted\" lines, want none:\n%v", n, lines.All())
				}
			})
		})
	}
}
