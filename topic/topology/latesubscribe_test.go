package topology_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// lateSubscribe makes Subscribe wait for release, whatever its context,
// and hands out readers whose Close panics once it has closed them, as a
// backend written by a user may.
type lateSubscribe[T any] struct {
	topology.Queues[T]
	entered chan struct{}
	release chan struct{}
}

func (q *lateSubscribe[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	close(q.entered)
	<-q.release
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	return panickyClose[T]{r}, nil
}

type panickyClose[T any] struct{ topology.Reader[T] }

func (r panickyClose[T]) Close(ctx context.Context) error {
	_ = r.Reader.Close(ctx)
	panic("reader close broke")
}

// Guarantee: a reader whose Subscribe returns after the source closed is
// closed at once, and a panic of its Close is contained: the run ends
// without error and the panic is logged (WARN), as for the source's other
// readers.
func TestAPanicClosingAReaderSubscribedAfterCloseIsContained(t *testing.T) {
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	defer m.Close(t.Context())
	top, _ := topology.New("late").Build()
	mq, _ := m.Declare(t.Context(), top)
	q := &lateSubscribe[int]{Queues: mq, entered: make(chan struct{}), release: make(chan struct{})}
	var lines logtest.Lines
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.NewTextHandler(&lines, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan any, 1)
	go func() {
		defer func() { ran <- recover() }()
		if err := src.Run(t.Context(), nil); err != nil {
			t.Errorf("Run subscribed after Close = %v, want nil", err)
		}
	}()
	<-q.entered
	if err := src.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(q.release)
	select {
	case r := <-ran:
		if r != nil {
			t.Fatalf("Run panicked: %v", r)
		}
	case <-time.After(wait.Deadline):
		t.Fatalf("Run still running %v after its Subscribe returned", wait.Deadline)
	}
	if got := lines.Matching("subscribed after the source closed"); len(got) != 1 || !strings.Contains(got[0], "reader close broke") {
		t.Errorf("logged %q, want one WARN line with the panic", lines.All())
	}
	if n := src.Stats().Subscriptions; n != 0 {
		t.Errorf("Subscriptions = %d, want 0", n)
	}
}
