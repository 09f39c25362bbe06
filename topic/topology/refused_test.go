package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: an in-memory hold queue holds at most HoldCapacity letters
// (DefaultMemoryHoldCapacity by default): a Hold past it fails at once
// with an error wrapping ErrFull that names the hold queue, and the
// letters it holds are released as before.
func TestMemoryHoldQueueHoldsAtMostHoldCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(context.Background())
		top := build(t, topology.New("bounded").Hold(time.Second))
		q, err := m.Declare(t.Context(), top)
		if err != nil {
			t.Fatal(err)
		}
		for v := range topology.DefaultMemoryHoldCapacity {
			if err := q.Hold(t.Context(), 0, topology.Letter[int]{Value: v}); err != nil {
				t.Fatalf("Hold of letter %d = %v, want nil below HoldCapacity", v, err)
			}
		}
		err = q.Hold(t.Context(), 0, topology.Letter[int]{Value: -1})
		if !errors.Is(err, topology.ErrFull) {
			t.Fatalf("Hold past HoldCapacity (%d letters held) = %v, want an error wrapping ErrFull", m.Held("bounded-hold-1s"), err)
		}
		if want := `hold queue "bounded-hold-1s"`; !strings.Contains(err.Error(), want) {
			t.Errorf("Hold past HoldCapacity = %q, want it to name the %s", err, want)
		}
		if n := m.Held("bounded-hold-1s"); n != topology.DefaultMemoryHoldCapacity {
			t.Errorf("Held = %d, want %d", n, topology.DefaultMemoryHoldCapacity)
		}
	})
}

// Guarantee: HoldCapacity is validated: 1 to MaxMemoryHoldCapacity, 0
// meaning the default.
func TestMemoryOptionsBoundHoldCapacity(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{-1, "memory.holdCapacity"}, {topology.MaxMemoryHoldCapacity + 1, "memory.holdCapacity"}} {
		if _, err := topology.NewMemory[int](topology.MemoryOptions{HoldCapacity: c.n}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewMemory with HoldCapacity %d = %v, want an error naming %s", c.n, err, c.want)
		}
	}
	for _, n := range []int{0, 1, topology.MaxMemoryHoldCapacity} {
		m, err := topology.NewMemory[int](topology.MemoryOptions{HoldCapacity: n})
		if err != nil {
			t.Errorf("NewMemory with HoldCapacity %d = %v", n, err)
			continue
		}
		_ = m.Close(context.Background())
	}
}

// fullDLQ declares the topology "plain" with a DLQ on an in-memory backend
// of Capacity 1 whose DLQ is full, and as many dead letters (100, 101)
// wait for room behind it: a dead-lettering is refused with ErrFull.
func fullDLQ(t *testing.T) (*topology.Memory[int], topology.Queues[int]) {
	t.Helper()
	m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 1})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	q, err := m.Declare(t.Context(), build(t, topology.New("plain").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	for v := 100; v < 102; v++ {
		if err := q.DeadLetter(t.Context(), topology.Letter[int]{Value: v, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "plain"}}); err != nil {
			t.Fatal(err)
		}
	}
	return m, q
}

// rejectAll is a handler that rejects every message, counting them.
func rejectAll(n *atomic.Int64) processor.Handler[int, int] {
	return func(context.Context, *message.Message[int]) (int, error) {
		n.Add(1)
		return 0, topology.Reject(errors.New("malformed"))
	}
}

// Guarantee: a letter whose dead-lettering a full DLQ refuses (ErrFull)
// is not lost: the source keeps it and hands it off again, with backoff,
// until the DLQ has room, in the order the letters were refused; it logs
// one WARN line when the refusals start and one INFO line when the
// letters it kept are all handed off, not one per attempt, and says a
// letter is dead-lettered only once the DLQ took it.
func TestDeadLetterRefusedByAFullDLQIsKeptUntilItHasRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := fullDLQ(t)
		var recs logtest.Records
		var handled atomic.Int64
		src, p := startLoggingPipeline(t, q, slog.New(&recs), rejectAll(&handled))
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		for v := 1; v <= 2; v++ {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute) // fake time: many attempts, all refused
		synctest.Wait()
		if handled.Load() != 2 {
			t.Fatalf("handled %d messages, want 2", handled.Load())
		}
		if n := recs.Count(slog.LevelWarn, "message dead-lettered"); n != 0 {
			t.Fatalf("%d lines say a letter the DLQ refused was dead-lettered", n)
		}
		rd, err := q.SubscribeDead(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close(context.Background())
		var got []int
		for range 60 {
			got = append(got, queuedValues(rd)...)
			if len(got) >= 4 {
				break
			}
			time.Sleep(time.Second) // fake time: the next attempt
			synctest.Wait()
		}
		if !slices.Equal(got, []int{100, 101, 1, 2}) {
			t.Fatalf("the DLQ received %v, want [100 101 1 2]: no letter lost, in order", got)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := src.Stats(); st.DeadLettered != 2 {
			t.Errorf("stats %+v, want 2 dead-lettered", st)
		}
		if n := recs.Count(slog.LevelWarn, "message dead-lettered"); n != 1 {
			t.Errorf("%d WARN lines for the 2 letters dead-lettered once the DLQ had room, want 1 (the second held back)", n)
		}
		if n := recs.Count(slog.LevelWarn, topology.RefusedLog); n != 1 {
			t.Errorf("%d WARN lines %q, want 1", n, topology.RefusedLog)
		}
		if n := recs.Count(slog.LevelInfo, topology.RecoveredLog); n != 1 {
			t.Errorf("%d INFO lines %q, want 1", n, topology.RecoveredLog)
		}
	})
}

// Guarantee: a source that stops while it keeps letters a full queue
// refused gives them back (Queues.Return), within Stop's deadline: the
// next consumer of the group receives them, none is lost.
func TestLettersKeptForRoomAreGivenBackAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := fullDLQ(t)
		var handled atomic.Int64
		_, p := startPipeline(t, q, rejectAll(&handled))
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Stop took %v with a letter kept, want no wait", waited)
		}
		rd, err := q.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close(context.Background())
		if got := queuedValues(rd); fmt.Sprint(got) != "[1]" {
			t.Fatalf("the next consumer receives %v, want [1]: the letter the DLQ refused, given back", got)
		}
	})
}

// Guarantee: while a source keeps letters a full queue refused, it takes
// no new letter from its queues beyond those in flight when the refusals
// began (backpressure: the rest wait in the backend, whose publishers
// wait in turn), so its memory does not grow with what is published.
func TestSourceKeepingRefusedLettersTakesNoMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := fullDLQ(t)
		var handled atomic.Int64
		src, p := startPipeline(t, q, rejectAll(&handled))
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		const published = 1000
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			for v := range published {
				if pub.Publish(ctx, v) != nil {
					return
				}
			}
		})
		time.Sleep(time.Minute) // fake time: the DLQ stays full
		synctest.Wait()
		early := src.Stats()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		late := src.Stats()
		cancel()
		wg.Wait()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if late.Received != early.Received || late.Received >= published/2 || late.Refused != int(late.Received) {
			t.Fatalf("the source took %d letters of %d after 1 minute, %d after 11, keeping %d; want it to stop taking once it keeps refused letters",
				early.Received, published, late.Received, late.Refused)
		}
	})
}

// Guarantee: on a bad day (every message fails once, faster than its
// hold releases them) the in-memory hold queue never holds more than
// HoldCapacity letters: the source keeps the retries it refuses and
// takes no more meanwhile; every message is still handled again after
// its hold and acked once, none lost.
func TestBadDayInMemoryIsBoundedByHoldCapacityAndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 4, HoldCapacity: 2})
		defer m.Close(context.Background())
		q, err := m.Declare(t.Context(), build(t, topology.New("plain").Hold(10*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		acked := map[int]int{}
		src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.New(pipeline.Options[int, int]{
			Name:     "bad-day",
			Logger:   slog.New(slog.DiscardHandler),
			Producer: producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Concurrency: 2, Handle: func(_ context.Context, msg *message.Message[int]) (int, error) {
				if d, _ := topology.DeliveryOf(msg); d.Retries == 0 {
					return 0, topology.Retry(errors.New("downstream down"))
				}
				mu.Lock()
				acked[msg.Data]++
				mu.Unlock()
				return msg.Data, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer p.Stop(context.Background())
		const published = 40
		var wg sync.WaitGroup
		wg.Go(func() {
			pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
			for v := range published {
				if err := pub.Publish(t.Context(), v); err != nil {
					t.Error(err)
					return
				}
			}
		})
		most := 0
		for range 20000 {
			synctest.Wait()
			most = max(most, m.Held("plain-hold-10s"))
			if src.Stats().Acked == published {
				break
			}
			time.Sleep(100 * time.Millisecond) // fake time: holds and backoffs pass
		}
		wg.Wait()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if most > 2 {
			t.Errorf("the hold queue held up to %d letters, want at most HoldCapacity (2)", most)
		}
		mu.Lock()
		defer mu.Unlock()
		for v := range published {
			if acked[v] != 1 {
				t.Errorf("message %d acked %d times, want once (acked: %v; stats %+v)", v, acked[v], acked, src.Stats())
				break
			}
		}
	})
}

// Guarantee: on a topology without hold queues, retries requeued into a
// group queue that publishers keep full are never refused nor lost: a
// letter received from the queue goes back to it over its capacity
// (publishers wait meanwhile), so every message is handled again and
// acked once, and the source never waits on a queue only it drains.
func TestRetriesWithoutHoldsIntoAFullQueueLoseNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 2})
		defer m.Close(context.Background())
		q, err := m.Declare(t.Context(), build(t, topology.New("plain")))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		acked := map[int]int{}
		var recs logtest.Records
		src, p := startLoggingPipeline(t, q, slog.New(&recs), func(_ context.Context, msg *message.Message[int]) (int, error) {
			if d, _ := topology.DeliveryOf(msg); d.Retries == 0 {
				return 0, topology.Retry(errors.New("downstream down"))
			}
			mu.Lock()
			acked[msg.Data]++
			mu.Unlock()
			return msg.Data, nil
		})
		const published = 200
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		for v := range published {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		for range 600 {
			synctest.Wait()
			if src.Stats().Acked == published {
				break
			}
			time.Sleep(100 * time.Millisecond) // fake time
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for v := range published {
			if acked[v] != 1 {
				t.Fatalf("message %d acked %d times, want once (%d acked; stats %+v; %d refused hand-offs logged)",
					v, acked[v], len(acked), src.Stats(), recs.Count(slog.LevelError, topology.HandOffFailedLog))
			}
		}
	})
}

// Guarantee: on a sequenced topology, a key's retry whose hold a full
// in-memory hold queue refuses keeps its key's place: the source keeps it
// until the hold queue has room, the retry comes back, and the later
// message of its key follows it; nothing is lost.
func TestSequencedRetryRefusedByAFullHoldQueueKeepsItsKeysPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{HoldCapacity: 1})
		defer m.Close(context.Background())
		q, err := m.Declare(t.Context(), build(t, topology.New("ledger").Sequenced(topology.Skip).Hold(time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		// The hold queue is full until its letter falls due.
		if err := q.Hold(t.Context(), 0, topology.Letter[int]{Value: 99, Key: "Z"}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var handled []int
		src, p := startPipeline(t, q, func(_ context.Context, msg *message.Message[int]) (int, error) {
			mu.Lock()
			handled = append(handled, msg.Data)
			first := msg.Data == 1 && slices.Index(handled, 1) == len(handled)-1
			mu.Unlock()
			if first {
				return 0, topology.Retry(errors.New("gateway down"))
			}
			return msg.Data, nil
		})
		publishOneTwoToKeyA(t, q)
		synctest.Wait()
		if st := src.Stats(); st.Refused != 1 {
			t.Fatalf("stats %+v while the hold queue is full, want the retry kept (Refused 1)", st)
		}
		time.Sleep(time.Minute) // fake time: the hold's letter falls due, the retry is held and comes back
		synctest.Wait()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if got := slices.DeleteFunc(slices.Clone(handled), func(v int) bool { return v == 99 }); !slices.Equal(got, []int{1, 1, 2}) {
			t.Fatalf("key A handled %v, want [1 1 2]", got)
		}
		if st := src.Stats(); st.Acked != 3 || st.Refused != 0 || st.HeldBack != 0 {
			t.Fatalf("stats %+v, want 3 acked (99, 1, 2), nothing kept or held back", st)
		}
	})
}

// refuseFirstDeadLetter refuses the first dead letter for room (ErrFull,
// keeping nothing), as a DLQ with no room for a moment does, and takes
// every later one.
type refuseFirstDeadLetter struct {
	topology.Queues[int]
	refused atomic.Bool
}

func (q *refuseFirstDeadLetter) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	if q.refused.CompareAndSwap(false, true) {
		return fmt.Errorf("DLQ: %w", topology.ErrFull)
	}
	return q.Queues.DeadLetter(ctx, l)
}

// Guarantee: a hand-off that comes while the source keeps letters a full
// queue refused goes behind them, even when the queue would take it, so
// that dead letters reach the DLQ in the order they died.
func TestAHandOffWhileLettersAreKeptGoesBehindThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("plain").DLQ()))
		q := &refuseFirstDeadLetter{Queues: mq}
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{})
		for v := 1; v <= 2; v++ { // both taken at once, before the first dies
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		var handled atomic.Int64
		src, p := startPipeline(t, q, rejectAll(&handled))
		time.Sleep(time.Minute) // fake time: the kept letter's next attempt
		synctest.Wait()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		rd, err := mq.SubscribeDead(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close(context.Background())
		if got := queuedValues(rd); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("the DLQ received %v, want [1 2]: the letter rejected second waits behind the one kept for room", got)
		}
		if st := src.Stats(); handled.Load() != 2 || st.DeadLettered != 2 {
			t.Errorf("handled %d, stats %+v; want 2 handled and 2 dead-lettered", handled.Load(), st)
		}
	})
}

// fullRequeue refuses every requeue for room (ErrFull), as a full queue
// would.
type fullRequeue struct{ topology.Queues[int] }

func (fullRequeue) Requeue(context.Context, topology.Letter[int]) error {
	return fmt.Errorf("requeue: %w", topology.ErrFull)
}

// Guarantee: once the source has closed, it keeps no letter a full queue
// refuses, since nothing would hand it off or give it back any more: a
// deferred message whose outcome comes after Close (its owner's drain cut
// short), a retry whose requeue a full queue refuses, is counted as a
// failed hand-off (Stats.HandOffFailed) and settled, for a durable
// backend to deliver it again, and the source keeps nothing
// (Stats.Refused is 0).
func TestALetterRefusedForRoomAfterCloseIsNotKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mq := declareMemory(t, build(t, topology.New("late").DLQ()))
		fq := &failingQueues[int]{Queues: fullRequeue{mq}}
		outcomes := make(chan acker.Outcome, 1)
		src, p := startPipeline(t, fq, func(_ context.Context, m *message.Message[int]) (int, error) {
			m.Defer()
			outcomes <- m.Outcome()
			return m.Data, nil
		})
		pub, _ := topology.NewPublisher(mq, topology.PublisherOptions[int]{})
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		o := <-outcomes
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		o.Err = topology.Retry(errors.New("downstream refused"))
		src.Ack(context.Background(), nil, []acker.Outcome{o})
		synctest.Wait()
		st := src.Stats()
		if st.Retried != 1 || st.HandOffFailed != 1 || st.Refused != 0 {
			t.Errorf("stats %+v after a retry refused for room once the source closed, want 1 retried, 1 failed hand-off, none refused and kept", st)
		}
		fq.mu.Lock()
		defer fq.mu.Unlock()
		if r := fq.readers[0]; r.settled != 1 {
			t.Errorf("the letter whose requeue was refused after Close was settled %d times, want once", r.settled)
		}
	})
}
