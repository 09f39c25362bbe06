package topology_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// skippingQueues wraps queues so that their readers count undecodable
// letters as a durable backend's do (topology.UndecodableCounter), and
// resubscriptions as a Pulsar broadcast reader does
// (topology.ResubscribeCounter): the test sets what a reader has counted,
// and each counts closingSkips more undecodable letters as it closes
// (letters its fetching skipped before it stopped). With failFirst, the
// first reader skips firstSkips letters, counts firstResubscribes
// resubscriptions and then fails its first Receive, as one whose
// connection broke.
type skippingQueues[T any] struct {
	topology.Queues[T]
	failFirst bool
	// readers receives each reader Subscribe returns: Subscribe waits
	// until the test takes it.
	readers chan *skippingReader[T]
	// stats is read as a reader's Close begins; set before the test
	// takes the first reader.
	stats func() topology.Stats
	subs  atomic.Int32
}

const (
	closingSkips      = 2
	firstSkips        = 3
	firstResubscribes = 4
)

type skippingReader[T any] struct {
	topology.Reader[T]
	q       *skippingQueues[T]
	fail    bool
	skipped atomic.Uint64
	resubs  atomic.Uint64
	once    sync.Once
	// atClose is Stats().Undecodable as its Close began.
	atClose atomic.Uint64
}

func (q *skippingQueues[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	sr := &skippingReader[T]{Reader: r, q: q, fail: q.failFirst && q.subs.Add(1) == 1}
	select {
	case q.readers <- sr:
		return sr, nil
	case <-ctx.Done():
		_ = r.Close(ctx)
		return nil, ctx.Err()
	}
}

func (r *skippingReader[T]) Receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if r.fail {
		r.fail = false
		r.skipped.Add(firstSkips)
		r.resubs.Add(firstResubscribes)
		return 0, errors.New("connection reset")
	}
	return r.Reader.Receive(ctx, dst)
}

func (r *skippingReader[T]) Undecodable() uint64 { return r.skipped.Load() }

func (r *skippingReader[T]) Resubscribes() uint64 { return r.resubs.Load() }

func (r *skippingReader[T]) Close(ctx context.Context) error {
	r.once.Do(func() {
		r.atClose.Store(r.q.stats().Undecodable)
		r.skipped.Add(closingSkips)
	})
	return r.Reader.Close(ctx)
}

// startSkipping starts a pipeline over a source of q that does nothing
// with its messages, and returns its first reader.
func startSkipping(t *testing.T, q *skippingQueues[int]) (*topology.Source[int], func() error, *skippingReader[int]) {
	t.Helper()
	src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
	q.stats = src.Stats
	r := <-q.readers
	return src, func() error { return p.Stop(context.Background()) }, r
}

// Guarantee: Stats.Undecodable adds up what the source's readers counted
// (topology.UndecodableCounter), and keeps it once the source closes them,
// what they counted while closing included. It never goes down, not even
// while a reader closes.
func TestUndecodableLettersStayCountedOnceTheSourceCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("skips")))
		q := &skippingQueues[int]{Queues: mq, readers: make(chan *skippingReader[int])}
		src, stop, r := startSkipping(t, q)
		synctest.Wait()
		r.skipped.Store(firstSkips)
		if n := src.Stats().Undecodable; n != firstSkips {
			t.Fatalf("Stats().Undecodable = %d with the reader open, want %d", n, firstSkips)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := r.atClose.Load(); n != firstSkips {
			t.Errorf("Stats().Undecodable = %d while the source closed the reader, want %d", n, firstSkips)
		}
		if st := src.Stats(); st.Undecodable != firstSkips+closingSkips || st.Subscriptions != 0 {
			t.Errorf("once the source closed: Stats().Undecodable = %d (%d subscriptions), want %d (0)",
				st.Undecodable, st.Subscriptions, firstSkips+closingSkips)
		}
	})
}

// Guarantee: a broadcast source that closes its reader at the end of a
// run (here one whose Receive failed, the stage running it again with a
// new reader) keeps what that reader counted (Stats.Undecodable), what it
// counted while closing included, and adds the new reader's count to it;
// the count never goes down, not even while a reader closes.
func TestUndecodableLettersStayCountedOnceABroadcastRunEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("skips").Broadcast()))
		q := &skippingQueues[int]{Queues: mq, failFirst: true, readers: make(chan *skippingReader[int])}
		src, stop, r1 := startSkipping(t, q)
		r2 := <-q.readers // the run after the failed one
		synctest.Wait()
		if n := r1.atClose.Load(); n != firstSkips {
			t.Errorf("Stats().Undecodable = %d while the run's end closed its reader, want %d", n, firstSkips)
		}
		want := uint64(firstSkips + closingSkips)
		if st := src.Stats(); st.Undecodable != want || st.Subscriptions != 1 {
			t.Fatalf("after a run's end closed its reader: Stats().Undecodable = %d (%d subscriptions), want %d (1)",
				st.Undecodable, st.Subscriptions, want)
		}
		r2.skipped.Store(1)
		if n := src.Stats().Undecodable; n != want+1 {
			t.Fatalf("Stats().Undecodable = %d with the new reader's 1, want %d", n, want+1)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := r2.atClose.Load(); n != want+1 {
			t.Errorf("Stats().Undecodable = %d while the second reader closed, want %d", n, want+1)
		}
		if n := src.Stats().Undecodable; n != want+1+closingSkips {
			t.Errorf("Stats().Undecodable = %d once the pipeline stopped, want %d", n, want+1+closingSkips)
		}
	})
}

// Guarantee: Stats.BroadcastResubscribes adds up what the source's
// readers counted (topology.ResubscribeCounter), and keeps what a reader
// counted once a broadcast run's end closed it (here one whose Receive
// failed, the stage running it again with a new reader).
func TestBroadcastResubscribesStayCountedOnceABroadcastRunEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("resubs").Broadcast()))
		q := &skippingQueues[int]{Queues: mq, failFirst: true, readers: make(chan *skippingReader[int])}
		src, stop, _ := startSkipping(t, q)
		r2 := <-q.readers // the run after the failed one
		synctest.Wait()
		if st := src.Stats(); st.BroadcastResubscribes != firstResubscribes || st.Subscriptions != 1 {
			t.Fatalf("after a run's end closed its reader: Stats().BroadcastResubscribes = %d (%d subscriptions), want %d (1)",
				st.BroadcastResubscribes, st.Subscriptions, firstResubscribes)
		}
		r2.resubs.Store(1)
		if n := src.Stats().BroadcastResubscribes; n != firstResubscribes+1 {
			t.Fatalf("Stats().BroadcastResubscribes = %d with the new reader's 1, want %d", n, firstResubscribes+1)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := src.Stats().BroadcastResubscribes; n != firstResubscribes+1 {
			t.Errorf("Stats().BroadcastResubscribes = %d once the pipeline stopped, want %d", n, firstResubscribes+1)
		}
	})
}
