package topologytest

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// CutShortStop checks that a pipeline stop that the shutdown timeout cuts
// short delivers each letter once after a restart, when nothing crashed.
// It publishes six letters to q (a topology with a hold and a DLQ, on one
// partition), runs a pipeline over a Source of q whose four handlers each
// hold a letter and return only once the pipeline has given up on them
// (Run returns a *pipeline.ShutdownTimeoutError): the source requeues
// those four, and its Close gets a context already cancelled. Then it
// calls restart, which closes q's backend with a context of its own and
// returns the same topology declared on a new backend over the same
// broker state (or q itself, for a backend that keeps nothing past its
// Close), and receives up to a letter it publishes then: no letter may be
// delivered twice, each requeued one must be delivered once, by its copy,
// and, when redelivers is set (a durable backend, which delivers again
// what was received and never settled), so must the two left
// unacknowledged.
func CutShortStop(t *testing.T, q topology.Queues[Msg], restart func() topology.Queues[Msg], redelivers bool) {
	t.Helper()
	const handlers, letters, end = 4, 6, -1
	for n := 1; n <= letters; n++ {
		if err := q.Publish(t.Context(), topology.Letter[Msg]{Value: Msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := topology.NewSource(topology.SourceOptions[Msg]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var inFlight atomic.Int32
	p, err := pipeline.New(pipeline.Options[Msg, Msg]{
		Name:            "cut-short",
		Logger:          slog.New(slog.DiscardHandler),
		ShutdownTimeout: 200 * time.Millisecond,
		Producer:        producer.Options[Msg]{Source: src},
		Processors: processor.Options[Msg, Msg]{
			Concurrency: handlers,
			MaxDemand:   1, // the first letters, one per handler
			Handle: func(ctx context.Context, m *message.Message[Msg]) (Msg, error) {
				inFlight.Add(1)
				<-ctx.Done()
				<-gate // past CancelGrace: the pipeline gives up on it first
				return m.Data, ctx.Err()
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	wait.For(t, "every handler to hold a letter", func() bool { return inFlight.Load() == handlers })
	cancel()
	err = <-ran
	close(gate)
	<-p.Done()
	if ste := (*pipeline.ShutdownTimeoutError)(nil); !errors.As(err, &ste) {
		t.Fatalf("Run = %v, want a *pipeline.ShutdownTimeoutError", err)
	}
	if got := src.Stats().Requeued; got != handlers {
		t.Fatalf("the source requeued %d letters, want the %d whose handling the cut interrupted", got, handlers)
	}
	q = restart()
	r, err := q.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer MustClose(t, "the reader after the restart", r.Close)
	// A last letter marks the end: the group receives it after every
	// letter published or requeued before the restart.
	if err := q.Publish(t.Context(), topology.Letter[Msg]{Value: Msg{N: end}}); err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	buf := make([]topology.Letter[Msg], letters+1)
	for seen[end] == 0 {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		n, err := r.Receive(ctx, buf)
		cancel()
		if err != nil {
			t.Fatalf("Receive, with the letters seen so far %v: %v", seen, err)
		}
		for i := range buf[:n] {
			seen[buf[i].Value.N]++
			if err := r.Settle(t.Context(), &buf[i]); err != nil {
				t.Fatalf("Settle: %v", err)
			}
		}
	}
	twice := 0
	for n := 1; n <= letters; n++ {
		switch k := seen[n]; {
		case k == 0 && (n <= handlers || redelivers):
			t.Errorf("letter %d lost: not delivered after the restart", n)
		case k > 1:
			twice++
		}
	}
	if twice > 0 {
		t.Errorf("%d of %d letters delivered more than once after the restart, want each once (deliveries per letter: %v)", twice, letters, seen)
	}
}
