package topology_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The in-memory backend passes the whole topology suite, in fake time.
func TestMemorySuite(t *testing.T) {
	topologytest.Run(t, topologytest.Config{
		Synctest: true,
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			return m
		},
	})
}

// Guarantee: two topologies whose derived hold names meet ("x" for group
// "g", and "x.g") each get their own retries back: the in-memory hold
// queue they share releases a letter to the group that held it, as the
// Kafka and Pulsar backends do.
func TestMeetingHoldNamesReleaseToTheirOwnGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		t1, err := topology.New("x").ForConsumerGroup("g").Hold(time.Second).Build()
		if err != nil {
			t.Fatal(err)
		}
		t2, err := topology.New("x.g").Hold(time.Second).Build()
		if err != nil {
			t.Fatal(err)
		}
		if t1.Names()[1] != t2.Names()[1] {
			t.Fatalf("hold names %v and %v do not meet", t1.Names(), t2.Names())
		}
		q1, err := m.Declare(t.Context(), t1)
		if err != nil {
			t.Fatal(err)
		}
		q2, err := m.Declare(t.Context(), t2)
		if err != nil {
			t.Fatal(err)
		}
		if err := q2.Hold(t.Context(), 0, topology.Letter[int]{Value: 7}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		r1, _ := q1.Subscribe(t.Context())
		defer r1.Close(t.Context())
		r2, _ := q2.Subscribe(t.Context())
		defer r2.Close(t.Context())
		buf := make([]topology.Letter[int], 4)
		n1, _ := r1.TryReceive(t.Context(), buf)
		n2, _ := r2.TryReceive(t.Context(), buf)
		if n1 != 0 || n2 != 1 {
			t.Errorf("the retry of %q reached group %q %d times and its own group %d times, want 0 and 1",
				t2.Name(), t1.ConsumerGroup(), n1, n2)
		}
	})
}

// Guarantee: Replay loses no dead letter it took from an in-memory DLQ
// when putting one back on the main topic fails (here: the group's queue
// is full, its consumers down, and all but one of the places for letters
// waiting for room behind it are taken): every letter is either replayed,
// and reported so, or still in the DLQ.
func TestReplayFailureKeepsTheDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 4})
		defer m.Close(t.Context())
		top, _ := topology.New("rp").DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		// Bounds a wait for room, which must not happen.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		for i := range 4 { // the group's queue is full: its consumers are down
			if err := q.Publish(ctx, topology.Letter[int]{Value: 100 + i}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 { // three retries wait for room behind it
			if err := q.Requeue(ctx, topology.Letter[int]{Value: 200 + i}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			l := topology.Letter[int]{Value: i, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "rp", Group: "rp"}}
			if err := q.DeadLetter(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := topology.Replay(ctx, q, topology.ReplayOptions[int]{})
		if !errors.Is(err, topology.ErrFull) {
			t.Fatalf("Replay into a full queue with one place left behind it = %v, want ErrFull", err)
		}
		replayed := m.Queued("rp", "rp") - 7 // what Replay put after the publishes and retries
		if got := replayed + m.Queued("rp-dlq", ""); replayed != 1 || got != 3 || len(rep.Replayed) != replayed {
			t.Errorf("Replay failed (%v) after replaying %d letters (reported %d; want 1), and the DLQ holds %d: %d of 3 dead letters lost",
				err, replayed, len(rep.Replayed), m.Queued("rp-dlq", ""), 3-got)
		}
	})
}

// Guarantee: Replay loses no dead letter it took from an in-memory DLQ
// that other consumers filled, and the room behind it, while Replay ran:
// a letter it keeps (DryRun, a filter) goes back to the DLQ it came from
// even over its capacity (it held the letter already), and a letter
// whose replay the group's full queue refuses stays in the DLQ, Replay
// returning that failure; all are counted in Kept.
func TestReplayKeepsTheDeadLettersItCannotPutBack(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    func(fill func()) topology.ReplayOptions[int]
		refused bool
	}{
		{"kept by the filter", func(fill func()) topology.ReplayOptions[int] {
			return topology.ReplayOptions[int]{Filter: func(*topology.Letter[int]) bool { fill(); return false }}
		}, false},
		{"dry run", func(fill func()) topology.ReplayOptions[int] {
			return topology.ReplayOptions[int]{DryRun: true, Filter: func(*topology.Letter[int]) bool { fill(); return true }}
		}, false},
		{"replay refused", func(fill func()) topology.ReplayOptions[int] {
			return topology.ReplayOptions[int]{Filter: func(*topology.Letter[int]) bool { fill(); return true }}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const capacity = 2
				m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: capacity})
				defer m.Close(t.Context())
				top, _ := topology.New("rk").DLQ().Build()
				q, _ := m.Declare(t.Context(), top)
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				dead := func(v int) error {
					return q.DeadLetter(ctx, topology.Letter[int]{Value: v,
						Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "rk", Group: "rk"}})
				}
				for v := range capacity {
					if err := dead(v); err != nil {
						t.Fatal(err)
					}
				}
				// The group's queue is full, and as many retries wait
				// behind it: a replay is refused.
				for v := range 2 * capacity {
					if err := q.Requeue(ctx, topology.Letter[int]{Value: 100 + v}); err != nil {
						t.Fatal(err)
					}
				}
				// While Replay holds the letters it took, consumers
				// dead-letter more: the DLQ fills, and as many wait
				// behind it.
				var once sync.Once
				fill := func() {
					once.Do(func() {
						for v := range 2 * capacity {
							if err := dead(200 + v); err != nil {
								t.Errorf("dead-lettering %d while Replay runs: %v", 200+v, err)
							}
						}
					})
				}
				rep, err := topology.Replay(ctx, q, c.opts(fill))
				if c.refused && !errors.Is(err, topology.ErrFull) {
					t.Errorf("Replay = %v, want an error wrapping ErrFull", err)
				}
				if !c.refused && err != nil {
					t.Errorf("Replay = %v, want nil: its letters go back to the DLQ they came from", err)
				}
				want := 2*capacity + capacity // the letters dead-lettered meanwhile, and the ones Replay took
				if got := m.Queued("rk-dlq", ""); got != want || rep.Kept != capacity {
					t.Errorf("the DLQ holds %d letters, want %d: %d lost; Replay reports %d kept, want %d",
						got, want, want-got, rep.Kept, capacity)
				}
				if got := m.Queued("rk", "rk"); got != 2*capacity {
					t.Errorf("the group's queue holds %d letters, want %d: none replayed", got, 2*capacity)
				}
			})
		})
	}
}

// Guarantee: a Replay filter that panics stops Replay with an error
// wrapping the *message.PanicError, and loses no dead letter it took from
// an in-memory DLQ: the letters before it are replayed, the one it panicked
// on and those after it stay in the DLQ.
func TestReplayFilterPanicKeepsTheDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := topology.New("fp").DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		for i := range 3 {
			l := topology.Letter[int]{Value: i, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "fp", Group: "fp"}}
			if err := q.DeadLetter(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := topology.Replay(ctx, q, topology.ReplayOptions[int]{Filter: func(l *topology.Letter[int]) bool {
			if l.Value == 1 {
				panic("filter")
			}
			return true
		}})
		var pe *message.PanicError
		if !errors.As(err, &pe) || pe.Value != "filter" {
			t.Fatalf("Replay with a panicking filter = %v, want an error wrapping its *message.PanicError", err)
		}
		if len(rep.Replayed) != 1 || rep.Kept != 2 || m.Queued("fp", "fp") != 1 || m.Queued("fp-dlq", "") != 2 {
			t.Errorf("replayed %d (reported %d, want 1), DLQ holds %d (kept %d, want 2)",
				m.Queued("fp", "fp"), len(rep.Replayed), m.Queued("fp-dlq", ""), rep.Kept)
		}
	})
}

// Guarantee: a Publisher whose Key panics fails that Publish with an
// error wrapping the *message.PanicError and publishes nothing; the next
// value goes out.
func TestPublisherKeyPanicFailsOnlyThatPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, err := topology.New("kp").Sequenced(topology.Skip).DLQ().Build()
		if err != nil {
			t.Fatal(err)
		}
		q, err := m.Declare(t.Context(), top)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(v int) string {
			if v == 1 {
				panic("key")
			}
			return "A"
		}})
		if err != nil {
			t.Fatal(err)
		}
		err = pub.Publish(t.Context(), 1)
		var pe *message.PanicError
		if !errors.As(err, &pe) || pe.Value != "key" {
			t.Fatalf("Publish with a panicking Key = %v, want an error wrapping its *message.PanicError", err)
		}
		if err := pub.Publish(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		if n := m.Queued("kp", "kp"); n != 1 {
			t.Fatalf("%d letters queued, want 1, the one value published", n)
		}
	})
}

// Guarantee: in memory, a requeue and a dead-lettering never wait for room:
// into a full queue they return at once, the letters wait behind it and
// reach it in order as readers make room, and past Capacity letters
// waiting they fail with ErrFull instead of waiting.
func TestMemoryRequeueAndDeadLetterNeverWaitForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 2})
		defer m.Close(t.Context())
		top, _ := topology.New("full").DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		// Bounds a wait for room, which must not happen.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		dead := func(v int) topology.Letter[int] {
			return topology.Letter[int]{Value: v, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "full"}}
		}
		for v := range 2 { // both queues full, nobody reading
			if err := q.Publish(ctx, topology.Letter[int]{Value: v}); err != nil {
				t.Fatal(err)
			}
			if err := q.DeadLetter(ctx, dead(v)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		for v := 10; v < 12; v++ {
			if err := q.Requeue(ctx, topology.Letter[int]{Value: v}); err != nil {
				t.Fatalf("Requeue into a full queue = %v, want nil at once", err)
			}
			if err := q.DeadLetter(ctx, dead(v)); err != nil {
				t.Fatalf("DeadLetter into a full DLQ = %v, want nil at once", err)
			}
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Requeue and DeadLetter into full queues took %s, want no wait", waited)
		}
		if err := q.Requeue(ctx, topology.Letter[int]{Value: 12}); !errors.Is(err, topology.ErrFull) {
			t.Errorf("Requeue with Capacity letters waiting = %v, want ErrFull", err)
		}
		if err := q.DeadLetter(ctx, dead(12)); !errors.Is(err, topology.ErrFull) {
			t.Errorf("DeadLetter with Capacity letters waiting = %v, want ErrFull", err)
		}
		if n, d := m.Queued("full", "full"), m.Queued("full-dlq", ""); n != 4 || d != 4 {
			t.Errorf("Queued = %d and %d, want 4 and 4 (2 queued, 2 waiting for room)", n, d)
		}
		for name, subscribe := range map[string]func(context.Context) (topology.Reader[int], error){
			"group": q.Subscribe, "DLQ": q.SubscribeDead,
		} {
			r, err := subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			buf := make([]topology.Letter[int], 1)
			for len(got) < 4 {
				n, err := r.Receive(ctx, buf)
				if err != nil {
					t.Fatalf("%s: Receive after %v: %v", name, got, err)
				}
				for _, l := range buf[:n] {
					got = append(got, l.Value)
				}
			}
			r.Close(t.Context())
			if fmt.Sprint(got) != "[0 1 10 11]" {
				t.Errorf("%s received %v, want [0 1 10 11]", name, got)
			}
		}
		// Nothing waits any more once the goroutine that moved the waiting
		// letters in has seen none left and ended (until then the last
		// letter it moved still counts as moving): a requeue goes
		// straight in again.
		synctest.Wait()
		if err := q.Requeue(ctx, topology.Letter[int]{Value: 13}); err != nil {
			t.Fatal(err)
		}
		if n := m.Queued("full", "full"); n != 1 {
			t.Errorf("Queued = %d after a requeue into an empty queue, want 1", n)
		}
	})
}

// Guarantee: in memory, a pipeline whose group queue publishers keep full,
// and whose DLQ nobody reads, still carries out a retry without hold
// queues and a dead-lettering, and goes on: its acknowledgement never
// waits for room in a queue.
func TestFullQueuesNeverStallAPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 2})
		defer m.Close(t.Context())
		top, _ := topology.New("busy").DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		for v := range 2 { // a full DLQ nobody reads
			l := topology.Letter[int]{Value: -1 - v, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "busy"}}
			if err := q.DeadLetter(t.Context(), l); err != nil {
				t.Fatal(err)
			}
		}
		gate := make(chan struct{})
		var mu sync.Mutex
		handled := map[int]int{}
		src, p := startPipeline(t, q, func(ctx context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			handled[m.Data]++
			n := handled[m.Data]
			mu.Unlock()
			switch {
			case m.Data == 1 && n == 1:
				select { // everything else queues up behind it
				case <-gate:
				case <-ctx.Done():
				}
				return 0, topology.Retry(errors.New("flaky"))
			case m.Data == 2:
				return 0, topology.Reject(errors.New("malformed"))
			}
			return m.Data, nil
		})
		defer p.Stop(context.Background())
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		const total = 400 // far more than the pipeline's buffers and the queue hold
		ctx, cancel := context.WithCancel(t.Context())
		published := make(chan error, 1)
		go func() {
			for v := 1; v <= total; v++ {
				if err := pub.Publish(ctx, v); err != nil {
					published <- err
					return
				}
			}
			published <- nil
		}()
		stopPublishing := sync.OnceValue(func() error {
			cancel()
			return <-published
		})
		defer stopPublishing()
		synctest.Wait()
		if n := m.Queued("busy", "busy"); n != 2 {
			t.Fatalf("the group's queue holds %d letters before the retry, want it full (2)", n)
		}
		close(gate)
		wait.Within(t, time.Minute, "every letter handled, 1 twice, and 2 dead", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(handled) == total && handled[1] == 2 && src.Stats().DeadLettered == 1
		}, func() string { return fmt.Sprintf("stats %+v", src.Stats()) })
		if n := m.Queued("busy-dlq", ""); n != 3 {
			t.Errorf("the DLQ holds %d letters, want 3", n)
		}
		if err := stopPublishing(); err != nil {
			t.Errorf("Publish: %v", err)
		}
		ctxStop, cancelStop := context.WithTimeout(context.Background(), time.Minute)
		defer cancelStop()
		if err := p.Stop(ctxStop); err != nil {
			t.Errorf("Stop = %v, want nil: the drain was not held up", err)
		}
	})
}

// Guarantee: once the in-memory backend is closed, every operation of its
// queues returns ErrClosed, as the Queues contract says: a broadcast
// topology's Publish too (it reports no letter as published that nobody
// can receive), and Subscribe and SubscribeDead hand out no reader.
func TestClosedMemoryRefusesPublishAndSubscribe(t *testing.T) {
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	bc, _ := topology.New("everyone").Broadcast().Build()
	plain, _ := topology.New("orders").DLQ().Build()
	qb, err := m.Declare(t.Context(), bc)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := m.Declare(t.Context(), plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := qb.Publish(t.Context(), topology.Letter[int]{Value: 1}); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("broadcast Publish after Close = %v, want ErrClosed", err)
	}
	for name, q := range map[string]topology.Queues[int]{"broadcast": qb, "plain": qp} {
		if r, err := q.Subscribe(t.Context()); !errors.Is(err, topology.ErrClosed) {
			t.Errorf("%s Subscribe after Close = %v, %v; want ErrClosed", name, r, err)
		}
	}
	if r, err := qp.SubscribeDead(t.Context()); !errors.Is(err, topology.ErrClosed) {
		t.Errorf("SubscribeDead after Close = %v, %v; want ErrClosed", r, err)
	}
}

// Guarantee: two Closes of the in-memory backend called at once both
// return only once it is closed: after either returns, every queue it
// declared refuses a publish with ErrClosed.
func TestConcurrentMemoryClosesBothReturnOnceEveryQueueIsClosed(t *testing.T) {
	for range 20 {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		var qs []topology.Queues[int]
		for i := range 200 {
			top, _ := topology.New(fmt.Sprint("orders-", i)).Build()
			q, err := m.Declare(t.Context(), top)
			if err != nil {
				t.Fatal(err)
			}
			qs = append(qs, q)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if err := m.Close(t.Context()); err != nil {
					t.Errorf("Close = %v", err)
				}
				for i, q := range qs {
					if err := q.Publish(t.Context(), topology.Letter[int]{Value: i}); !errors.Is(err, topology.ErrClosed) {
						t.Errorf("Publish into orders-%d once a Close returned = %v, want ErrClosed", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

// Guarantee: a pipeline stop that the shutdown timeout cuts short, with
// handlers that return only after the pipeline gave up on them, delivers
// no letter twice to the next consumer of the in-memory backend (see
// topologytest.CutShortStop; the backend lives on, since closing it loses
// its queues).
func TestAStopCutShortDeliversNoLetterTwiceToTheNextConsumer(t *testing.T) {
	m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	top, err := topology.New("cut-short").Hold(time.Second).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	topologytest.CutShortStop(t, q, func() topology.Queues[topologytest.Msg] { return q }, false)
}

// Guarantee: zero MemoryOptions size the in-memory queues as documented:
// a DLQ holds DefaultMemoryCapacity (4096) letters and as many more wait
// behind it before a dead-lettering fails with ErrFull, and a hold queue
// holds DefaultMemoryHoldCapacity (65536) letters before a Hold fails
// with ErrFull.
func TestZeroMemoryOptionsTakeTheDocumentedCapacities(t *testing.T) {
	if topology.DefaultMemoryCapacity != 4096 || topology.DefaultMemoryHoldCapacity != 65536 {
		t.Errorf("DefaultMemoryCapacity %d, DefaultMemoryHoldCapacity %d, want the documented 4096 and 65536",
			topology.DefaultMemoryCapacity, topology.DefaultMemoryHoldCapacity)
	}
	m, err := topology.NewMemory[int](topology.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(t.Context())
	top, _ := topology.New("sized").Hold(time.Hour).DLQ().Build()
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	fill := func(what string, want int, put func(v int) error) {
		t.Helper()
		for v := range want {
			if err := put(v); err != nil {
				t.Fatalf("%s letter %d of %d: %v", what, v+1, want, err)
			}
		}
		if err := put(want); !errors.Is(err, topology.ErrFull) {
			t.Errorf("%s letter %d = %v, want ErrFull past %d", what, want+1, err, want)
		}
	}
	fill("dead", 2*4096, func(v int) error {
		return q.DeadLetter(t.Context(), topology.Letter[int]{Value: v, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "sized"}})
	})
	fill("held", 65536, func(v int) error { return q.Hold(t.Context(), 0, topology.Letter[int]{Value: v}) })
	if n := m.Held("sized-hold-3600s"); n != 65536 {
		t.Errorf("Held = %d, want 65536", n)
	}
}

// Guarantee: an in-memory refusal for room says which bound it met: a
// hold queue's, the letters it holds (nothing waits behind a hold queue),
// and a DLQ's, the letters already waiting behind it.
func TestAFullQueueRefusalNamesTheBoundItMet(t *testing.T) {
	m, err := topology.NewMemory[int](topology.MemoryOptions{Capacity: 2, HoldCapacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(t.Context())
	top, _ := topology.New("told").Hold(time.Hour).DLQ().Build()
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	refusal := func(put func(v int) error) error {
		for v := range 10 {
			if err := put(v); err != nil {
				return err
			}
		}
		t.Fatal("10 letters taken by a queue of 2 or 3")
		return nil
	}
	cases := []struct {
		what       string
		put        func(v int) error
		want, dont string
	}{
		{"hold", func(v int) error { return q.Hold(t.Context(), 0, topology.Letter[int]{Value: v}) }, "it holds 3 letters", "wait for room"},
		{"dead-letter", func(v int) error {
			return q.DeadLetter(t.Context(), topology.Letter[int]{Value: v, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "told"}})
		}, "2 letters wait for room behind it", "holds"},
	}
	for _, c := range cases {
		err := refusal(c.put)
		if !errors.Is(err, topology.ErrFull) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.dont) {
			t.Errorf("%s refused with %q, want ErrFull saying %q and not %q", c.what, err, c.want, c.dont)
		}
	}
}
