package topologytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// errReset is the error the first reader's Receive fails with.
var errReset = errors.New("connection reset")

// failFirstQueues wraps queues so that their first reader hands out at
// least want letters in its first Receive (receiving until it has) and
// fails every Receive after, as a reader whose connection breaks does.
type failFirstQueues struct {
	topology.Queues[Msg]
	want int

	mu      sync.Mutex
	readers []*failFirstReader
}

type failFirstReader struct {
	topology.Reader[Msg]
	q     *failFirstQueues
	first bool

	// guarded by q.mu
	received int
	closed   bool
}

func (q *failFirstQueues) Subscribe(ctx context.Context) (topology.Reader[Msg], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	fr := &failFirstReader{Reader: r, q: q, first: len(q.readers) == 0}
	q.readers = append(q.readers, fr)
	return fr, nil
}

func (r *failFirstReader) Receive(ctx context.Context, dst []topology.Letter[Msg]) (int, error) {
	r.q.mu.Lock()
	received := r.received
	r.q.mu.Unlock()
	if !r.first {
		return r.Reader.Receive(ctx, dst)
	}
	if received > 0 {
		return 0, errReset
	}
	if len(dst) < r.q.want {
		return 0, fmt.Errorf("a Receive into %d letters, want room for %d", len(dst), r.q.want)
	}
	n := 0
	for n < r.q.want {
		k, err := r.Reader.Receive(ctx, dst[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	r.q.mu.Lock()
	r.received = n
	r.q.mu.Unlock()
	return n, nil
}

func (r *failFirstReader) Close(ctx context.Context) error {
	r.q.mu.Lock()
	r.closed = true
	r.q.mu.Unlock()
	return r.Reader.Close(ctx)
}

// state returns how many readers were subscribed, and whether the first
// is closed.
func (q *failFirstQueues) state() (readers int, firstClosed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.readers) > 0 {
		firstClosed = q.readers[0].closed
	}
	return len(q.readers), firstClosed
}

// FailedSequencedRun checks that the keys a failed run's reader read go
// on with the next run's reader while the pipeline runs. q is a sequenced
// topology without hold queues, so that a retry is requeued to the main
// topic. It publishes three letters of one key, runs a pipeline over a
// Source of q whose first reader hands them out at once and then fails
// (the source holds the two later ones back behind the first, and the
// stage runs it again with a new reader), retries the first letter once,
// and publishes a fourth letter of the key once the second reader is
// subscribed. Within bound, the key's letters must all be handled, in
// order, the first twice (its retry) and the others once, and the failed
// run's reader must be closed.
func FailedSequencedRun(t *testing.T, q topology.Queues[Msg], bound time.Duration) {
	t.Helper()
	if _, ok := q.Topology().Sequenced(); !ok || len(q.Topology().Holds()) > 0 {
		t.Fatal("FailedSequencedRun needs a sequenced topology without hold queues")
	}
	fq := &failFirstQueues{Queues: q, want: 3}
	pub, err := topology.NewPublisher(fq, topology.PublisherOptions[Msg]{Key: func(m Msg) string { return m.Key }})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if err := pub.Publish(t.Context(), Msg{Key: "K", N: n}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := topology.NewSource(topology.SourceOptions[Msg]{Queues: fq, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var handled []int
	p, err := pipeline.New(pipeline.Options[Msg, Msg]{
		Name:     "failed-run",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[Msg]{Source: src},
		Processors: processor.Options[Msg, Msg]{
			Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[Msg]) (Msg, error) {
				mu.Lock()
				handled = append(handled, m.Data.N)
				first := m.Data.N == 1 && len(handled) == 1
				mu.Unlock()
				if first {
					return m.Data, topology.Retry(errors.New("not yet"))
				}
				return m.Data, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	wait.Within(t, bound, "the second reader, after the first run failed", func() bool {
		n, _ := fq.state()
		return n == 2
	})
	if err := pub.Publish(t.Context(), Msg{Key: "K", N: 4}); err != nil {
		t.Fatal(err)
	}
	want := []int{1, 1, 2, 3, 4}
	so := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(handled)
	}
	start := time.Now()
	wait.Within(t, bound, "the key's letters handled after the failed run", func() bool {
		return len(so()) >= len(want)
	}, func() string {
		n, closed := fq.state()
		return fmt.Sprintf("handled %v, want %v; %d readers subscribed, the failed run's closed: %t; source %+v",
			so(), want, n, closed, src.Stats())
	})
	t.Logf("the key's letters were handled %v after the second reader subscribed", time.Since(start))
	wait.Within(t, bound, "the failed run's reader closed", func() bool {
		_, closed := fq.state()
		return closed
	})
	if got := so(); !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v: the key's letters in order, each once and the retried one twice", got, want)
	}
}
