package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: whatever the producer concurrency, each message of a
// topology enters a pipeline once, broadcast included, numbered apart
// from 1 (its id), and a sequenced source reports itself ordered.
func TestProducerConcurrencyDeliversOnce(t *testing.T) {
	for _, b := range []*topology.Builder{
		topology.New("bal"),
		topology.New("bc").Broadcast(),
		topology.New("seq").Sequenced(topology.Skip).DLQ(),
	} {
		top, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		t.Run(top.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, _ := topology.NewMemory[int](topology.MemoryOptions{})
				defer m.Close(t.Context())
				q, err := m.Declare(t.Context(), top)
				if err != nil {
					t.Fatal(err)
				}
				src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q})
				if err != nil {
					t.Fatal(err)
				}
				if info, _ := src.Info(); info.Ordered != (top.Name() == "seq") {
					t.Errorf("Info().Ordered = %v", info.Ordered)
				}
				var mu sync.Mutex
				seen := map[int]int{}
				ids := map[uint64]int{}
				p, err := pipeline.New(pipeline.Options[int, int]{
					Name:     "once",
					Logger:   slog.New(slog.DiscardHandler),
					Producer: producer.Options[int]{Source: src, Concurrency: 3},
					Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
						_, id, _ := m.Acknowledger()
						mu.Lock()
						seen[m.Data]++
						ids[id]++
						mu.Unlock()
						return m.Data, nil
					}},
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				defer p.Stop(context.Background())
				wait.Within(t, time.Minute, "the subscription", func() bool { return src.Stats().Subscriptions > 0 })
				opts := topology.PublisherOptions[int]{}
				if top.Name() == "seq" {
					opts.Key = func(v int) string { return string(rune('a' + v%5)) }
				}
				pub, _ := topology.NewPublisher(q, opts)
				for i := range 100 {
					if err := pub.Publish(t.Context(), i); err != nil {
						t.Fatal(err)
					}
				}
				wait.Within(t, time.Minute, "100 acks", func() bool { return src.Stats().Acked == 100 })
				mu.Lock()
				defer mu.Unlock()
				for i := range 100 {
					if seen[i] != 1 {
						t.Errorf("message %d handled %d times", i, seen[i])
					}
				}
				for id := uint64(1); id <= 100; id++ {
					if ids[id] != 1 {
						t.Errorf("message id %d given %d times, want once: the source numbers its messages from 1 (ids seen: %v)", id, ids[id], ids)
						break
					}
				}
			})
		})
	}
}

// failOnce wraps queues so that the first reader fails its first
// Receive, and counts the readers open.
type failOnce[T any] struct {
	topology.Queues[T]
	mu     sync.Mutex
	failed bool
	open   int
	subs   int
}

type countedReader[T any] struct {
	topology.Reader[T]
	q    *failOnce[T]
	fail bool
	once sync.Once
}

func (q *failOnce[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open++
	q.subs++
	fail := !q.failed
	q.failed = true
	return &countedReader[T]{Reader: r, q: q, fail: fail}, nil
}

func (q *failOnce[T]) openReaders() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.open
}

func (r *countedReader[T]) Receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if r.fail {
		r.fail = false
		return 0, errors.New("connection reset")
	}
	return r.Reader.Receive(ctx, dst)
}

func (r *countedReader[T]) Close(ctx context.Context) error {
	r.once.Do(func() {
		r.q.mu.Lock()
		r.q.open--
		r.q.mu.Unlock()
	})
	return r.Reader.Close(ctx)
}

// Guarantee: a broadcast source whose run fails closes that run's
// subscription before the stage restarts it, so no abandoned subscription
// keeps collecting messages.
func TestBroadcastRestartClosesItsSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := topology.New("bc").Broadcast().Build()
		mq, _ := m.Declare(t.Context(), top)
		q := &failOnce[int]{Queues: mq}
		src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:     "restart",
			Logger:   slog.New(slog.DiscardHandler),
			Producer: producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				return m.Data, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer p.Stop(context.Background())
		wait.Within(t, time.Minute, "the second subscription after the failed run", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.subs == 2 && src.Stats().Subscriptions == 1
		})
		if n := q.openReaders(); n != 1 {
			t.Errorf("%d subscriptions open after a restart, want 1", n)
		}
	})
}

// Guarantee: a message whose handling the pipeline's shutdown interrupts
// is put back on its group's queue, not counted as a retry, whatever the
// handler asked for.
func TestInterruptedIsRequeued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := topology.New("cut").Hold(time.Second).DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		src, _ := topology.NewSource(topology.SourceOptions[int]{Queues: q})
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:            "cut",
			Logger:          slog.New(slog.DiscardHandler),
			ShutdownTimeout: time.Second,
			Producer:        producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
				<-ctx.Done()
				return 0, topology.Reject(ctx.Err())
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err := pub.Publish(t.Context(), 42); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, time.Minute, "the second subscription after the failed run", func() bool { return src.Stats().Received == 1 })
		_ = p.Stop(context.Background())
		st := src.Stats()
		if st.Requeued != 1 || st.Retried != 0 || st.DeadLettered != 0 {
			t.Errorf("stats %+v, want one requeue", st)
		}
		if n := m.Queued("cut", "cut"); n != 1 {
			t.Errorf("%d letters back on the group's queue, want 1", n)
		}
	})
}

// stuckQueues hands out readers whose Close waits for release, or for its
// context to end, as the leave of a broker that does not answer would.
type stuckQueues[T any] struct {
	topology.Queues[T]
	release <-chan struct{}
	mu      sync.Mutex
	readers []*stuckReader[T]
}

type stuckReader[T any] struct {
	topology.Reader[T]
	release  <-chan struct{}
	returned atomic.Bool // Close returned
}

func (q *stuckQueues[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	sr := &stuckReader[T]{Reader: r, release: q.release}
	q.mu.Lock()
	q.readers = append(q.readers, sr)
	q.mu.Unlock()
	return sr, nil
}

// waiting returns how many of its readers' Close have not returned.
func (q *stuckQueues[T]) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, r := range q.readers {
		if !r.returned.Load() {
			n++
		}
	}
	return n
}

func (r *stuckReader[T]) Close(ctx context.Context) error {
	defer r.returned.Store(true)
	select {
	case <-r.release:
		return r.Reader.Close(ctx)
	case <-ctx.Done():
		_ = r.Reader.Close(ctx)
		return fmt.Errorf("stuck reader: %w", ctx.Err())
	}
}

// Guarantee: the source's Close gives its context to its readers' Close:
// readers whose closing does not end (a broker that does not answer) hold
// the source's Close, and so the pipeline's Stop, no longer than the
// shutdown timeout; their Close has returned by then, and Stop reports the
// deadline.
func TestCloseBoundsItsReadersClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := topology.New("stuck").Build()
		mq, _ := m.Declare(t.Context(), top)
		release := make(chan struct{})
		defer close(release)
		q := &stuckQueues[int]{Queues: mq, release: release}
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
			func(o *pipeline.Options[int, int]) {
				o.ShutdownTimeout = time.Second
				o.Producer.Concurrency = 2
			})
		wait.Within(t, time.Minute, "both readers subscribed", func() bool { return src.Stats().Subscriptions == 2 })
		err := p.Stop(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop with the readers' Close stuck = %v, want an error wrapping context.DeadlineExceeded", err)
		}
		synctest.Wait()
		if n := q.waiting(); n != 0 {
			t.Errorf("%d readers' Close still wait after the pipeline stopped", n)
		}
	})
}

// Guarantee: MaxBatch is only a bound (a batch never exceeds the feed's
// permits): a source asked for MaxBatchLimit letters at once reserves, for
// each producer stage, buffers no larger than the stage's permit window,
// not MaxBatchLimit letters (about 16 MiB a stage), and delivers every
// message.
func TestLargestMaxBatchReservesOnlyTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		top, err := topology.New("big").Build()
		if err != nil {
			t.Fatal(err)
		}
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		q, err := m.Declare(t.Context(), top)
		if err != nil {
			t.Fatal(err)
		}
		src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxBatch: topology.MaxBatchLimit})
		if err != nil {
			t.Fatal(err)
		}
		const stages = 8
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:       "big",
			Logger:     slog.New(slog.DiscardHandler),
			Producer:   producer.Options[int]{Source: src, Concurrency: stages},
			Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
		})
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer p.Stop(context.Background())
		synctest.Wait() // every stage waits for letters
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
			t.Fatalf("starting %d producer stages with MaxBatch %d allocated %d MiB", stages, topology.MaxBatchLimit, got>>20)
		}
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		for i := range 300 {
			if err := pub.Publish(t.Context(), i); err != nil {
				t.Fatal(err)
			}
		}
		wait.Within(t, time.Minute, "300 acks", func() bool { return src.Stats().Acked == 300 })
	})
}

// slowSubscribe makes every Subscribe wait until release is closed, as a
// broker that is slow to admit a group member does.
type slowSubscribe[T any] struct {
	topology.Queues[T]
	release chan struct{}
	waiting atomic.Int32
}

func (q *slowSubscribe[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	q.waiting.Add(1)
	defer q.waiting.Add(-1)
	select {
	case <-q.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return q.Queues.Subscribe(ctx)
}

// Guarantee: a source's Stats never waits on its queues: it returns while
// a run's Subscribe waits for the broker, and the reader that Subscribe
// returns once it answers is counted. (In real time: without this, Stats
// waits on a mutex, which a synctest bubble cannot wait out.)
func TestStatsDoNotWaitForASubscribe(t *testing.T) {
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	defer m.Close(t.Context())
	top, _ := topology.New("slow").Build()
	mq, _ := m.Declare(t.Context(), top)
	q := &slowSubscribe[int]{Queues: mq, release: make(chan struct{})}
	src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
	wait.For(t, "the run's Subscribe", func() bool { return q.waiting.Load() == 1 })
	got := make(chan topology.Stats, 1)
	go func() { got <- src.Stats() }()
	select {
	case st := <-got:
		if st.Subscriptions != 0 {
			t.Errorf("stats %+v while the Subscribe waits, want no subscription", st)
		}
	case <-time.After(wait.Deadline):
		close(q.release)
		t.Fatalf("Stats still waiting after %v for a Subscribe", wait.Deadline)
	}
	close(q.release)
	wait.For(t, "the subscription", func() bool { return src.Stats().Subscriptions == 1 })
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
