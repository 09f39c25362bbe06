package topology_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/batchtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// notifyQueues wraps queues so that their readers are
// topology.ReleaseNotifiers and topology.ShardNotifiers that keep what
// OnRelease and OnShards set.
type notifyQueues[T any] struct {
	topology.Queues[T]
	mu       sync.Mutex
	readers  []*notifyReader[T]
	returned []T // the values of the letters given back (Return)
	// elsewhere, when set, has the letters given back only recorded, not
	// delivered again here: as a Kafka member's letters of a partition
	// it lets go, they go to another member.
	elsewhere bool
	// gone are the shards the readers were told they let go of since
	// their last assignment, or that it left out, and parked the letters
	// of them given back: as a Kafka member's, they are delivered again
	// here only once an assignment gives their shard back.
	gone   map[int]bool
	parked []topology.Letter[T]
	// letGo, when set, makes the readers topology.PartTrackers too, whose
	// LetGo it answers.
	letGo func(receipt any) bool
}

// partsNotifyReader is a notifyReader that knows each letter's part.
type partsNotifyReader[T any] struct {
	*notifyReader[T]
	letGo func(receipt any) bool
}

func (r *partsNotifyReader[T]) LetGo(receipt any) bool { return r.letGo(receipt) }

func (q *notifyQueues[T]) Return(ctx context.Context, ls []topology.Letter[T]) error {
	q.mu.Lock()
	var back []topology.Letter[T]
	for i := range ls {
		q.returned = append(q.returned, ls[i].Value)
		switch {
		case q.elsewhere:
		case q.gone[ls[i].Shard]:
			q.parked = append(q.parked, ls[i])
		default:
			back = append(back, ls[i])
		}
	}
	q.mu.Unlock()
	if len(back) == 0 {
		return nil
	}
	return q.Queues.Return(ctx, back)
}

// told records that a reader was told change with in.
func (q *notifyQueues[T]) told(change topology.ShardChange, in func(shard int) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.gone == nil {
		q.gone = map[int]bool{}
	}
	for shard := range q.Topology().RoutingShards() {
		switch change {
		case topology.ShardsReleased:
			q.gone[shard] = q.gone[shard] || in(shard)
		case topology.ShardsAssigned:
			q.gone[shard] = !in(shard)
		}
	}
}

// unpark delivers again the letters parked whose shard is back.
func (q *notifyQueues[T]) unpark(ctx context.Context) error {
	q.mu.Lock()
	var back []topology.Letter[T]
	k := 0
	for _, l := range q.parked {
		if q.gone[l.Shard] {
			q.parked[k] = l
			k++
		} else {
			back = append(back, l)
		}
	}
	q.parked = q.parked[:k]
	q.mu.Unlock()
	if len(back) == 0 {
		return nil
	}
	return q.Queues.Return(ctx, back)
}

// takeReturned returns and forgets the values given back so far.
func (q *notifyQueues[T]) takeReturned() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.returned
	q.returned = nil
	return out
}

type notifyReader[T any] struct {
	topology.Reader[T]
	q      *notifyQueues[T]
	mu     sync.Mutex
	f      func() (done func())
	shards func(topology.ShardChange, func(shard int) bool)
	// received, when set, is called with the letters a Receive took
	// before it returns them.
	received func([]topology.Letter[T])
}

func (r *notifyReader[T]) Receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	n, err := r.Reader.Receive(ctx, dst)
	r.mu.Lock()
	f := r.received
	r.mu.Unlock()
	if f != nil && n > 0 {
		f(dst[:n])
	}
	return n, err
}

// onReceived sets received.
func (r *notifyReader[T]) onReceived(f func([]topology.Letter[T])) {
	r.mu.Lock()
	r.received = f
	r.mu.Unlock()
}

func (r *notifyReader[T]) OnShards(f func(topology.ShardChange, func(shard int) bool)) {
	r.mu.Lock()
	r.shards = f
	r.mu.Unlock()
}

// tell tells what OnShards set, if anything, of change with in, as a
// backend's reader would; it reports whether something was set. The
// letters parked of the shards an assignment gives back are delivered
// again once it was told.
func (r *notifyReader[T]) tell(change topology.ShardChange, in func(shard int) bool) bool {
	r.q.told(change, in)
	r.mu.Lock()
	f := r.shards
	r.mu.Unlock()
	if f != nil {
		f(change, in)
	}
	if change == topology.ShardsAssigned {
		if err := r.q.unpark(context.Background()); err != nil {
			panic(err)
		}
	}
	return f != nil
}

func (r *notifyReader[T]) OnRelease(f func() (done func())) {
	r.mu.Lock()
	r.f = f
	r.mu.Unlock()
}

func (r *notifyReader[T]) onRelease() func() (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f
}

func (q *notifyQueues[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	nr := &notifyReader[T]{Reader: r, q: q}
	q.mu.Lock()
	q.readers = append(q.readers, nr)
	q.mu.Unlock()
	if q.letGo != nil {
		return &partsNotifyReader[T]{notifyReader: nr, letGo: q.letGo}, nil
	}
	return nr, nil
}

// reader returns the one reader subscribed.
func (q *notifyQueues[T]) reader(t *testing.T) *notifyReader[T] {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.readers) != 1 {
		t.Fatalf("%d readers subscribed, want 1", len(q.readers))
	}
	return q.readers[0]
}

// Guarantee: a Source sets the OnRelease of a reader that is a
// topology.ReleaseNotifier to what has its pipeline's open batches
// emitted at once, not at BatchTimeout, and sets nil once the Run that
// subscribed the reader has returned (the reader outlives it).
func TestSourceHasItsReadersReleaseEmitTheOpenBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := topology.New("rel").Build()
		mq, _ := m.Declare(t.Context(), top)
		q := &notifyQueues[int]{Queues: mq}
		src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q})
		if err != nil {
			t.Fatal(err)
		}
		batches := batchtest.New[int]()
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:     "rel",
			Logger:   slog.New(slog.DiscardHandler),
			Producer: producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				return m.Data, nil
			}},
			Batchers: []batcher.Options[int]{batches.Batcher(100, time.Hour)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r := q.reader(t)
		release := r.onRelease()
		if release == nil {
			t.Fatal("the running Source set no OnRelease on its reader")
		}
		if err := mq.Publish(t.Context(), topology.Letter[int]{Value: 1}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		batches.None(t, "before BatchTimeout")
		done := release()
		synctest.Wait()
		batches.Emitted(t, "the reader's OnRelease", 1)
		done()
		if err := p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r.onRelease() != nil {
			t.Error("the reader's OnRelease is still set once the Run that subscribed it has returned")
		}
	})
}
