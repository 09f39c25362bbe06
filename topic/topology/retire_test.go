package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// failingQueues wraps queues so that each of their first fails readers
// fails its Receive once it has handed out letters, as a reader whose
// broker connection breaks does, and records for every reader the letters
// it handed out, those settled through it, and how many were still out
// when it was closed (a durable backend delivers those again), and how
// many letters were given back (Return). With
// stuck set, the failing readers' Close waits for it to be closed, or for
// its context to end, as the leave of a broker that does not answer would.
type failingQueues[T any] struct {
	topology.Queues[T]
	fails int
	stuck <-chan struct{}
	// failEmpty makes the failing readers fail on their first Receive,
	// with no letter out, rather than once they received one.
	failEmpty bool

	// returnErr, when set, is what Return fails with, giving back
	// nothing.
	returnErr error
	// closePanics makes the failing readers' Close panic once it has
	// closed them, as a backend written by a user may.
	closePanics bool

	mu       sync.Mutex
	readers  []*failingReader[T]
	returned int
}

func (q *failingQueues[T]) Return(ctx context.Context, ls []topology.Letter[T]) error {
	q.mu.Lock()
	q.returned += len(ls)
	q.mu.Unlock()
	if q.returnErr != nil {
		return q.returnErr
	}
	return q.Queues.Return(ctx, ls)
}

// givenBack returns how many letters were given back (Return).
func (q *failingQueues[T]) givenBack() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.returned
}

type failingReader[T any] struct {
	topology.Reader[T]
	q    *failingQueues[T]
	fail bool

	// guarded by q.mu
	received, settled int
	closed            bool
	outAtClose        int
}

func (q *failingQueues[T]) Subscribe(ctx context.Context) (topology.Reader[T], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	fr := &failingReader[T]{Reader: r, q: q, fail: len(q.readers) < q.fails}
	q.readers = append(q.readers, fr)
	return fr, nil
}

func (r *failingReader[T]) Receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	r.q.mu.Lock()
	fail := r.fail && (r.received > 0 || r.q.failEmpty)
	r.q.mu.Unlock()
	if fail {
		return 0, errors.New("connection reset")
	}
	n, err := r.Reader.Receive(ctx, dst)
	r.q.mu.Lock()
	r.received += n
	r.q.mu.Unlock()
	return n, err
}

func (r *failingReader[T]) Settle(ctx context.Context, l *topology.Letter[T]) error {
	r.q.mu.Lock()
	r.settled++
	r.q.mu.Unlock()
	return r.Reader.Settle(ctx, l)
}

func (r *failingReader[T]) Close(ctx context.Context) error {
	r.q.mu.Lock()
	if !r.closed {
		r.closed = true
		r.outAtClose = r.received - r.settled
	}
	r.q.mu.Unlock()
	if r.fail && r.q.stuck != nil {
		select {
		case <-r.q.stuck:
		case <-ctx.Done():
			_ = r.Reader.Close(ctx)
			return fmt.Errorf("stuck reader: %w", ctx.Err())
		}
	}
	err := r.Reader.Close(ctx)
	if r.fail && r.q.closePanics {
		panic("reader close broke")
	}
	return err
}

// declareFailing declares tb on an in-memory backend, closed when the
// test ends, and returns the backend and its queues wrapped so that their
// first fails readers fail.
func declareFailing(t *testing.T, tb *topology.Builder, fails int) (*topology.Memory[int], *failingQueues[int]) {
	t.Helper()
	top, err := tb.Build()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	mq, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	return m, &failingQueues[int]{Queues: mq, fails: fails}
}

// subscribed returns how many readers were subscribed, and how many of
// them are open.
func (q *failingQueues[T]) subscribed() (all, open int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range q.readers {
		if !r.closed {
			open++
		}
	}
	return len(q.readers), open
}

// closedWithLettersOut returns the letters the closed readers had handed
// out and not settled when they were closed.
func (q *failingQueues[T]) closedWithLettersOut() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, r := range q.readers {
		if r.closed {
			n += r.outAtClose
		}
	}
	return n
}

// publishKeyed publishes 0 to n-1 to q, all of key A.
func publishKeyed(t *testing.T, q topology.Queues[int], n int) {
	t.Helper()
	pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
	for v := range n {
		if err := pub.Publish(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitGivenBack waits, in a synctest bubble, for the reader the stage
// subscribes after the first run failed, and for the bubble to settle,
// then checks that the failed run gave back want letters (Return).
func (q *failingQueues[T]) awaitGivenBack(t *testing.T, want int) {
	t.Helper()
	wait.Within(t, time.Minute, "the next reader after the failed run", func() bool {
		all, _ := q.subscribed()
		return all == 2
	})
	synctest.Wait()
	if n := q.givenBack(); n != want {
		t.Fatalf("%d letters given back, want %d, the failed run's later letters of the key", n, want)
	}
}

// Guarantee: a reader whose run failed with no letter out is closed at
// once, not kept open until the source closes: after any number of such
// failures the source holds one reader open.
func TestFailedRunsReaderWithNoLetterOutIsClosedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const fails = 3
		_, q := declareFailing(t, topology.New("retire-empty"), fails)
		q.failEmpty = true
		src, _ := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data, nil
		}, func(o *pipeline.Options[int, int]) {
			o.Producer.Restart.MaxRestarts = 2 * fails
		})
		wait.Within(t, time.Minute, "a reader after the failed runs", func() bool {
			all, _ := q.subscribed()
			return all == fails+1
		})
		synctest.Wait()
		if all, open := q.subscribed(); open != 1 {
			t.Errorf("%d of %d readers open after %d runs failed with no letter out, want 1", open, all, fails)
		}
		if st := src.Stats(); st.Subscriptions != 1 {
			t.Errorf("Stats().Subscriptions = %d after %d runs failed with no letter out, want 1", st.Subscriptions, fails)
		}
	})
}

// Guarantee: a reader whose run failed (its Receive returned an error, and
// the producer stage ran the source again with a new reader) is retired: it
// receives nothing more, stays open while letters it handed out are in
// the pipeline, settles them when their outcomes come, and is closed as
// soon as the last one is settled. After any number of failed runs, the
// source holds one reader open plus those with letters still out, not one
// per failure until it closes; no letter is delivered twice, and Close
// closes the rest.
func TestFailedRunsReaderIsClosedOnceItsLettersAreSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const fails = 3
		m, q := declareFailing(t, topology.New("retire"), fails)
		gate := make(chan struct{})
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			<-gate
			return m.Data, nil
		}, func(o *pipeline.Options[int, int]) {
			o.Processors.Concurrency = fails + 1
			o.Producer.Restart.MaxRestarts = 2 * fails
		})
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		for i := range fails {
			if err := pub.Publish(t.Context(), i); err != nil {
				t.Fatal(err)
			}
			wait.Within(t, time.Minute, "the next reader after a failed run", func() bool {
				all, _ := q.subscribed()
				return all == i+2
			})
		}
		synctest.Wait()
		if _, open := q.subscribed(); open != fails+1 {
			t.Errorf("%d readers open with a letter out from each failed run, want %d", open, fails+1)
		}
		if st := src.Stats(); st.Subscriptions != fails+1 {
			t.Errorf("Stats().Subscriptions = %d with a letter out from each failed run, want %d", st.Subscriptions, fails+1)
		}
		close(gate)
		wait.Within(t, time.Minute, "the letters acked", func() bool { return src.Stats().Acked == fails })
		synctest.Wait()
		if all, open := q.subscribed(); open != 1 {
			t.Errorf("%d of %d readers open once the failed runs' letters are settled, want 1", open, all)
		}
		if st := src.Stats(); st.Subscriptions != 1 {
			t.Errorf("Stats().Subscriptions = %d once the failed runs' letters are settled, want 1", st.Subscriptions)
		}
		if n := q.closedWithLettersOut(); n != 0 {
			t.Errorf("readers closed with %d letters not settled, want every letter settled before its reader closes", n)
		}
		if err := pub.Publish(t.Context(), fails); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, time.Minute, "the last letter acked", func() bool { return src.Stats().Acked == fails+1 })
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := src.Stats(); st.Received != fails+1 || st.Acked != fails+1 {
			t.Errorf("stats %+v, want %d letters received and acked once each", st, fails+1)
		}
		if n := m.Queued("retire", "retire"); n != 0 {
			t.Errorf("%d letters back on the group's queue, want none", n)
		}
		if all, open := q.subscribed(); open != 0 {
			t.Errorf("%d of %d readers open after Close", open, all)
		}
	})
}

// Guarantee: on a sequenced topology, the letters a failed run's reader
// handed out that the source holds back behind their key go back to the
// group at once (Queues.Return), so that they do not keep that reader
// open: it is closed once its letter in the pipeline is settled, and the
// next run receives them again and delivers them in their key's order,
// each once.
func TestFailedSequencedRunsHeldBackLettersGoBackToTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareFailing(t, topology.New("retireseq").Sequenced(topology.Skip).DLQ(), 1)
		publishKeyed(t, q, 3)
		gate := make(chan struct{})
		var mu sync.Mutex
		var handled []int
		src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			<-gate
			mu.Lock()
			handled = append(handled, m.Data)
			mu.Unlock()
			return m.Data, nil
		})
		q.awaitGivenBack(t, 2)
		if st := src.Stats(); st.HeldBack != 2 || st.Received != 5 {
			t.Errorf("stats %+v, want the two letters given back received again and held back behind the first", st)
		}
		close(gate)
		wait.Within(t, time.Minute, "the letters acked", func() bool { return src.Stats().Acked == 3 })
		synctest.Wait()
		if all, open := q.subscribed(); open != 1 {
			t.Errorf("%d of %d readers open once the failed run's letter in the pipeline is settled, want 1", open, all)
		}
		if n := q.closedWithLettersOut(); n != 2 {
			t.Errorf("the failed run's reader closed with %d letters not settled, want the 2 given back only", n)
		}
		mu.Lock()
		got := slices.Clone(handled)
		mu.Unlock()
		if !slices.Equal(got, []int{0, 1, 2}) {
			t.Errorf("handled %v, want the key's letters once each, in order", got)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if all, open := q.subscribed(); open != 0 {
			t.Errorf("%d of %d readers open after Close", open, all)
		}
	})
}

// Guarantee: a failed run's reader with letters still out when the source
// closes is closed by Close, after the interrupted letters are put back.
func TestCloseClosesAFailedRunsReaderWithLettersOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, q := declareFailing(t, topology.New("retireclose"), 1)
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
		if err := pub.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		src, p := startPipeline(t, q, func(ctx context.Context, m *message.Message[int]) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		}, func(o *pipeline.Options[int, int]) { o.ShutdownTimeout = time.Second })
		wait.Within(t, time.Minute, "the next reader after the failed run", func() bool {
			all, _ := q.subscribed()
			return all == 2
		})
		synctest.Wait()
		_ = p.Stop(context.Background())
		if all, open := q.subscribed(); open != 0 {
			t.Errorf("%d of %d readers open after Close", open, all)
		}
		if n := q.closedWithLettersOut(); n != 0 {
			t.Errorf("readers closed with %d letters not settled, want the interrupted letter put back and settled first", n)
		}
		if st := src.Stats(); st.Requeued != 1 {
			t.Errorf("stats %+v, want the interrupted letter requeued", st)
		}
		if n := m.Queued("retireclose", "retireclose"); n != 1 {
			t.Errorf("%d letters back on the group's queue, want 1", n)
		}
	})
}

// startStuckRetiring starts a pipeline whose first reader fails once it
// has handed out a letter, which is acked at once, and whose Close then
// waits until stuck is closed or its context ends; it returns once the
// failed run's reader is retired and its closing waits.
func startStuckRetiring(t *testing.T, name string, stuck <-chan struct{}, log *slog.Logger) (*failingQueues[int], *pipeline.Pipeline[int, int]) {
	t.Helper()
	_, q := declareFailing(t, topology.New(name), 1)
	q.stuck = stuck
	pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{})
	if err := pub.Publish(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	src, p := startLoggingPipeline(t, q, log, func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
		func(o *pipeline.Options[int, int]) { o.ShutdownTimeout = time.Second })
	wait.Within(t, time.Minute, "the failed run's reader retired", func() bool {
		all, _ := q.subscribed()
		return all == 2 && src.Stats().Subscriptions == 1
	})
	synctest.Wait()
	return q, p
}

// Guarantee: the source closes a retired reader within a bound of its
// own (30 s): a closing that does not end (a broker that does not answer)
// is cut there and logged, and holds nothing up.
func TestRetiredReadersClosingIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := make(chan struct{})
		defer close(stuck)
		var recs logtest.Records
		q, p := startStuckRetiring(t, "retirebound", stuck, slog.New(&recs))
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if n := recs.Count(slog.LevelWarn, topology.RetiredCloseFailedLog); n != 0 {
			t.Fatalf("%d lines for the retired reader's closing before its bound", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := recs.Count(slog.LevelWarn, topology.RetiredCloseFailedLog); n != 1 {
			t.Errorf("%d WARN lines for the retired reader's closing cut at its bound (30s), want 1", n)
		}
		if all, open := q.subscribed(); open != 1 {
			t.Errorf("%d of %d readers open after the retired one's closing was cut, want 1", open, all)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("Stop = %v, want nil: the retired reader's closing ended at its bound", err)
		}
	})
}

// Guarantee: the source's Close waits, within its context, for the closing
// of a retired reader under way: it returns by its deadline with an error
// wrapping the context's, and that closing has ended by then.
func TestCloseWaitsForARetiredReadersClosingWithinItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := make(chan struct{})
		defer close(stuck)
		q, p := startStuckRetiring(t, "retirewait", stuck, slog.New(slog.DiscardHandler))
		start := time.Now()
		err := p.Stop(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop with a retired reader's closing stuck = %v, want an error wrapping context.DeadlineExceeded", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Stop took %v, want at most the shutdown timeout (1s)", took)
		}
		if all, open := q.subscribed(); open != 0 {
			t.Errorf("%d of %d readers open after Close", open, all)
		}
	})
}

// refusingQueues fails hand-offs as a broker would: its first Hold with
// an error of its own, its second and third for room (ErrFull), and its
// first DeadLetter for room.
type refusingQueues[T any] struct {
	topology.Queues[T]
	mu           sync.Mutex
	holds, deads int
}

func (q *refusingQueues[T]) Hold(ctx context.Context, i int, l topology.Letter[T]) error {
	q.mu.Lock()
	q.holds++
	n := q.holds
	q.mu.Unlock()
	switch n {
	case 1:
		return errors.New("hold topic unavailable")
	case 2, 3:
		return topology.ErrFull
	}
	return q.Queues.Hold(ctx, i, l)
}

func (q *refusingQueues[T]) DeadLetter(ctx context.Context, l topology.Letter[T]) error {
	q.mu.Lock()
	q.deads++
	n := q.deads
	q.mu.Unlock()
	if n == 1 {
		return topology.ErrFull
	}
	return q.Queues.DeadLetter(ctx, l)
}

// Guarantee: a failed run's reader is closed once its letters are
// settled, whatever their outcome: acked, retried through a hold queue,
// deferred, rejected, failed by a panic, dead-lettered with their key
// poisoned, their hand-off failed and tried again, or refused for room
// and kept. Every letter it handed out is counted off once, settled or,
// held back behind its key, given back to the group, so it closes, with
// none of the others unsettled, while the source runs.
func TestFailedRunsReaderIsClosedOnceEveryOutcomeSettledItsLetters(t *testing.T) {
	for _, policy := range []topology.SequenceFailure{topology.Skip, topology.FailAll} {
		t.Run(policy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, q := declareFailing(t, topology.New("retireall").Sequenced(policy).Hold(time.Second).DLQ(), 1)
				refusing := &refusingQueues[int]{Queues: q.Queues}
				q.Queues = refusing
				// Keys by tens: A rejected first (poisoning A under
				// FailAll), B retried once each, C deferred once each,
				// D failed by a panic once.
				pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(v int) string { return string(rune('A' + v/10)) }})
				values := []int{0, 1, 2, 10, 11, 12, 20, 21, 30}
				for _, v := range values {
					if err := pub.Publish(t.Context(), v); err != nil {
						t.Fatal(err)
					}
				}
				var mu sync.Mutex
				seen := map[int]int{}
				src, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
					mu.Lock()
					seen[m.Data]++
					n := seen[m.Data]
					mu.Unlock()
					switch {
					case m.Data == 0:
						return 0, topology.Reject(errors.New("bad order"))
					case m.Data/10 == 1 && n == 1:
						return 0, topology.Retry(errors.New("later"))
					case m.Data/10 == 2 && n == 1:
						return 0, topology.Defer()
					case m.Data == 30 && n == 1:
						panic("handler bug")
					}
					return m.Data, nil
				}, func(o *pipeline.Options[int, int]) { o.Processors.Concurrency = 4 })
				done := func() bool {
					st := src.Stats()
					return st.Acked+st.DeadLettered == uint64(len(values)) && st.HeldBack == 0 && st.Refused == 0
				}
				wait.Within(t, time.Minute, "every letter settled", done, func() string { return fmt.Sprintf("%+v", src.Stats()) })
				synctest.Wait()
				refusing.mu.Lock()
				holds, deads := refusing.holds, refusing.deads
				refusing.mu.Unlock()
				if holds < 4 || deads < 2 {
					t.Fatalf("%d holds and %d dead-letterings tried, want the refused ones tried again", holds, deads)
				}
				q.mu.Lock()
				first := q.readers[0]
				got := first.received
				q.mu.Unlock()
				if got != len(values) {
					t.Fatalf("the failing reader handed out %d letters, want all %d", got, len(values))
				}
				if all, open := q.subscribed(); all != 2 || open != 1 {
					t.Errorf("%d of %d readers open once the failed run's letters are settled, want 1 of 2", open, all)
				}
				if out, back := q.closedWithLettersOut(), q.givenBack(); out != back {
					t.Errorf("the failed run's reader closed with %d letters not settled, want the %d given back only", out, back)
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// Guarantee: the letters a failed run gives back leave the source's
// bound on held-back letters as it was. With MaxHeldBack reached by
// letters of a key waiting on its message out in a hold queue, that
// message comes back only through the reader, behind letters not yet
// taken: the next run takes letters past the bound, warning once, until
// it comes back, and the key's letters are then handled in order, the
// given-back one once. It does not wait for ever, as it would if the
// key still counted among those whose letters wait on a message handled
// in the pipeline.
func TestFailedRunsGivenBackLettersLeaveTheHeldBackBoundsEscapeOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 2
		_, q := declareFailing(t, topology.New("retirebound").Sequenced(topology.Skip).Hold(time.Second).DLQ(), 1)
		publishKeyed(t, q, 3)
		var logs logtest.Records
		src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxHeldBack: bound, Logger: slog.New(&logs)})
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		var mu sync.Mutex
		var handled []int
		attempts := map[int]int{}
		p := startPipelineOf(t, "retirebound", src, func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			handled = append(handled, m.Data)
			attempts[m.Data]++
			first := m.Data == 0 && attempts[m.Data] == 1
			mu.Unlock()
			if first {
				<-gate
				return 0, topology.Retry(errors.New("not yet"))
			}
			return m.Data, nil
		})
		// The failing reader hands out 0 and 1 (the bound allows two),
		// 1 waits behind 0, and its next Receive fails: 1 goes back, and
		// the next run takes 1 and 2, both behind 0, up to the bound.
		q.awaitGivenBack(t, 1)
		if st := src.Stats(); st.HeldBack != bound {
			t.Fatalf("stats %+v, want %d letters held back behind 0", st, bound)
		}
		if err := topology.CheckSequencer(src); err != nil {
			t.Fatal(err)
		}
		close(gate)
		time.Sleep(3 * time.Second) // fake time: the hold of 0 is over
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(handled)
		mu.Unlock()
		if want := []int{0, 0, 1, 2}; !slices.Equal(got, want) {
			t.Errorf("handled %v, want %v; stats %+v", got, want, src.Stats())
		}
		if n := logs.Count(slog.LevelWarn, overdrawWarning); n != 1 {
			t.Errorf("%d warnings %q, want 1", n, overdrawWarning)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: when the backend fails to take back the letters a failed
// run's reader handed out and the source held back, the source logs it
// at ERROR, once, with how many letters, and counts them off all the
// same: the reader is closed once its letter in the pipeline is settled,
// not kept open until the source closes.
func TestFailedRunsReaderIsClosedWhenGivingBackItsLettersFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareFailing(t, topology.New("retirelost").Sequenced(topology.Skip).DLQ(), 1)
		q.returnErr = errors.New("backend gone")
		publishKeyed(t, q, 3)
		var logs logtest.Records
		gate := make(chan struct{})
		src, p := startLoggingPipeline(t, q, slog.New(&logs), func(_ context.Context, m *message.Message[int]) (int, error) {
			<-gate
			return m.Data, nil
		})
		q.awaitGivenBack(t, 2)
		if n := logs.Count(slog.LevelError, topology.GiveBackFailedLog); n != 1 {
			t.Errorf("%d ERROR lines %q, want 1", n, topology.GiveBackFailedLog)
		}
		close(gate)
		wait.Within(t, time.Minute, "the letter in the pipeline acked", func() bool { return src.Stats().Acked == 1 })
		synctest.Wait()
		if all, open := q.subscribed(); all != 2 || open != 1 {
			t.Errorf("%d of %d readers open once the failed run's letter in the pipeline is settled, want 1 of 2", open, all)
		}
		if st := src.Stats(); st.Subscriptions != 1 || st.HeldBack != 0 {
			t.Errorf("stats %+v, want 1 subscription and nothing held back", st)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: a reader whose Close panics, on the goroutine the source
// closes it on once its run failed (a retired reader's closer, a
// broadcast run letting its reader go), fails that close with the panic
// as an error wrapping the *message.PanicError, logged at WARN, instead
// of crashing the process: the stage runs again with a new reader and
// the pipeline stops cleanly.
func TestAFailedRunsReaderWhoseClosePanicsFailsThatClose(t *testing.T) {
	for name, c := range map[string]struct {
		tb  *topology.Builder
		log string
	}{
		"retired":   {topology.New("retirepanic"), topology.RetiredCloseFailedLog},
		"broadcast": {topology.New("bcpanic").Broadcast(), topology.BroadcastCloseFailedLog},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var recs logtest.Records
				_, q := declareFailing(t, c.tb, 1)
				q.failEmpty, q.closePanics = true, true
				_, p := startLoggingPipeline(t, q, slog.New(&recs), func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil })
				wait.Within(t, time.Minute, "the next reader after the failed run", func() bool {
					all, open := q.subscribed()
					return all == 2 && open == 1
				})
				synctest.Wait()
				errs := recs.Errors(slog.LevelWarn, c.log)
				var pe *message.PanicError
				if len(errs) != 1 || !errors.As(errs[0], &pe) || pe.Value != "reader close broke" {
					t.Fatalf("errors logged for the failed run's reader's closing %v, want one wrapping the *message.PanicError of its Close", errs)
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
