package producer_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// pullSource fetches with Feed.Acquire (no grant callback), like a Kafka
// partition loop, and checks the window after every acquisition.
type pullSource struct {
	producer.Basic
	total   int
	maxSeen atomic.Int64
	overdue atomic.Int64
}

func (s *pullSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	f := st.NewFeed("pull", nil)
	for seq := 0; seq < s.total; {
		n, err := f.Acquire(ctx, 1+rand.IntN(30))
		if err != nil {
			return nil
		}
		if r := int64(f.Stats().Remaining); r > s.maxSeen.Load() {
			s.maxSeen.Store(r)
		}
		for range n {
			if seq == s.total {
				break
			}
			f.Deliver(message.New(item{Feed: "pull", Seq: seq}, nil, 0))
			seq++
		}
	}
	s.overdue.Store(int64(f.Stats().Overdelivered))
	return nil
}

// Guarantee: a pull-model feed hands out exactly the permits the window
// grants: every message is published, in order, and the window bound holds.
func TestPullFeedHonoursWindow(t *testing.T) {
	flow := producer.Flow{Initial: 20, Threshold: 5, Refill: 10}
	rec := newRecorder()
	rec.jitter = true
	src := &pullSource{total: 3000}
	h := start(t, "pull", producer.Options[item]{Source: src, Flow: flow}, rec, nil)
	waitDone(t, h)
	if got := rec.seqs("pull"); len(got) != 3000 || !isSeq(got) {
		t.Fatalf("published %d messages (in order: %v), want 3000 in order", len(got), isSeq(got))
	}
	if m := src.maxSeen.Load(); m > int64(flow.MaxWindow()) {
		t.Fatalf("remaining permits reached %d, bound is %d", m, flow.MaxWindow())
	}
	if src.overdue.Load() != 0 {
		t.Fatalf("a source using Acquire over-delivered %d messages", src.overdue.Load())
	}
}

func isSeq(s []int) bool {
	for i, v := range s {
		if v != i {
			return false
		}
	}
	return true
}

// Guarantee: Acquire returns ErrFeedClosed once the feed is closed, ctx's
// error when ctx ends, and TryAcquire never blocks.
func TestAcquireEnds(t *testing.T) {
	got := make(chan error, 3)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("f", nil)
		if n := f.TryAcquire(1000); n != producer.DefaultFlowInitial {
			got <- errors.New("TryAcquire did not take the initial permits")
		}
		if n := f.TryAcquire(1); n != 0 {
			got <- errors.New("TryAcquire found permits that were never granted")
		}
		short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		_, err := f.Acquire(short, 1)
		got <- err
		go func() { time.Sleep(5 * time.Millisecond); f.Close() }()
		_, err = f.Acquire(ctx, 1)
		got <- err
		<-ctx.Done()
		return nil
	})
	h := start(t, "acq", producer.Options[item]{Source: src}, newRecorder(), nil)
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with no permits = %v, want the context's error", err)
	}
	if err := <-got; !errors.Is(err, producer.ErrFeedClosed) {
		t.Fatalf("Acquire on a closed feed = %v, want ErrFeedClosed", err)
	}
	h.p.StopFetching()
	waitDone(t, h)
}

// Guarantee: Acquire refuses a feed whose permits go to a grant callback.
func TestAcquireOnPushFeed(t *testing.T) {
	got := make(chan error, 1)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("push", func(int) {})
		_, err := f.Acquire(ctx, 1)
		got <- err
		return nil
	})
	h := start(t, "push", producer.Options[item]{Source: src}, newRecorder(), nil)
	if err := <-got; !errors.Is(err, producer.ErrPushFeed) {
		t.Fatalf("Acquire = %v, want ErrPushFeed", err)
	}
	waitDone(t, h)
}

// deliverAtOnce runs a source whose one feed delivers n messages in one
// call, ignoring its grants, and is exhausted. It returns the feed's stats
// right after the delivery and the Output, once every message was
// dispatched.
func deliverAtOnce(t *testing.T, name string, n int, log *slog.Logger) (producer.FeedStats, *recorder) {
	t.Helper()
	var stats atomic.Pointer[producer.FeedStats]
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed(name, func(int) {})
		f.Deliver(items(0, n)...)
		s := f.Stats()
		stats.Store(&s)
		return nil
	})
	rec := newRecorder()
	h := start(t, name, producer.Options[item]{Source: src}, rec, log)
	waitDone(t, h)
	return *stats.Load(), rec
}

// Guarantee: a source that delivers more than it was granted is reported
// (logged once and counted), and its messages are still dispatched.
func TestOverdeliveryIsReported(t *testing.T) {
	log, lines := newLogRecorder()
	s, rec := deliverAtOnce(t, "greedy", 150, log) // 150 > Initial (100)
	if rec.published() != 150 {
		t.Fatalf("published %d, want all 150", rec.published())
	}
	if s.Overdelivered != 50 {
		t.Fatalf("Overdelivered = %d, want 50", s.Overdelivered)
	}
	if n := countLines(lines(), "more messages than it was granted"); n != 1 {
		t.Fatalf("over-delivery logged %d times, want once", n)
	}
}

// Guarantee: a source that delivers exactly the permits it was granted
// honours the window: nothing is logged or counted as over-delivery.
func TestDeliveringTheWholeWindowIsNotOverdelivery(t *testing.T) {
	log, lines := newLogRecorder()
	s, _ := deliverAtOnce(t, "exact", producer.DefaultFlowInitial, log) // the whole initial window
	if s.Overdelivered != 0 {
		t.Errorf("Overdelivered = %d after delivering exactly the %d permits granted, want 0", s.Overdelivered, producer.DefaultFlowInitial)
	}
	if n := countLines(lines(), "more messages than it was granted"); n != 0 {
		t.Errorf("over-delivery logged %d times for a source that delivered exactly its window, want never: %q", n, lines())
	}
}

// Guarantee: a feed registered after Run returned gets no permits.
func TestFeedOutsideRunGetsNoPermits(t *testing.T) {
	stageCh := make(chan *producer.Stage[item], 1)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		stageCh <- st
		return nil
	})
	h := start(t, "late", producer.Options[item]{Source: src}, newRecorder(), nil)
	waitDone(t, h)
	st := <-stageCh
	granted := 0
	f := st.NewFeed("late", func(n int) { granted += n })
	if granted != 0 || f.Stats().Granted != 0 || f.TryAcquire(10) != 0 {
		t.Fatalf("a feed registered outside Run was granted %d permits", granted)
	}
}

// Guarantee: a grant callback may deliver messages (a push-model source
// handing over what it prefetched) without deadlocking the stage.
func TestGrantCallbackMayDeliver(t *testing.T) {
	const total = 1000
	var (
		mu   sync.Mutex
		feed *producer.Feed[item]
		next int
	)
	deliver := func(n int) { // mu held
		for ; n > 0 && next < total; n-- {
			feed.Deliver(message.New(item{Feed: "p", Seq: next}, nil, 0))
			next++
		}
	}
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("p", func(n int) {
			mu.Lock()
			defer mu.Unlock()
			if feed != nil { // the initial grant comes from NewFeed itself
				deliver(n)
			}
		})
		mu.Lock()
		feed = f
		deliver(st.Flow().Initial)
		mu.Unlock()
		<-ctx.Done()
		return nil
	})
	rec := newRecorder()
	h := start(t, "grant-deliver", producer.Options[item]{Source: src}, rec, nil)
	wait.For(t, "every message to be published", func() bool { return rec.published() == total })
	h.p.StopFetching()
	waitDone(t, h)
}

// Guarantee: a grant callback that blocks, which the contract forbids, is
// named in the log when it keeps the stage from closing its feed after the
// source returned, and the stage finishes once the callback returns.
func TestBlockedGrantCallbackIsLogged(t *testing.T) {
	producer.SetGrantStallWarning(t, 50*time.Millisecond)
	log, lines := newLogRecorder()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("stuck", func(int) {
			if calls.Add(1) == 2 { // the first refill, from the dispatcher
				close(entered)
				<-release
			}
		})
		f.Deliver(items(0, 4)...)
		select {
		case <-entered:
		case <-ctx.Done():
		}
		return nil // the source is done; the refill is still blocked
	})
	rec := newRecorder()
	h := start(t, "stuck", producer.Options[item]{Source: src, Flow: producer.Flow{Initial: 4, Threshold: 2, Refill: 2}}, rec, log)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // runs before start's cleanup, which waits for the stage
	wait.For(t, "the stalled grant to be logged", func() bool {
		return countLines(lines(), "grant callback has not returned", "feed=stuck") > 0
	})
	select {
	case <-h.p.Done():
		t.Fatal("the producer finished while a grant callback was still running")
	default:
	}
	unblock()
	waitDone(t, h)
	if rec.published() != 4 {
		t.Fatalf("published %d, want 4", rec.published())
	}
	if n := countLines(lines(), "grant callback has not returned"); n != 1 {
		t.Fatalf("the stalled grant was logged %d times, want once", n)
	}
}

// Guarantee: Feed.Close wakes every goroutine blocked in Acquire on that
// feed, not only one.
func TestFeedCloseWakesAllAcquirers(t *testing.T) {
	res := make(chan error, 3)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("f", nil)
		f.TryAcquire(1 << 30) // take the initial permits
		var wg sync.WaitGroup
		var waiting sync.WaitGroup
		for range 3 {
			wg.Add(1)
			waiting.Add(1)
			go func() {
				defer wg.Done()
				waiting.Done()
				_, err := f.Acquire(ctx, 1)
				res <- err
			}()
		}
		waiting.Wait()
		f.Close() // a revoked partition: ctx is not cancelled
		wg.Wait()
		<-ctx.Done()
		return nil
	})
	h := start(t, "close-wakes", producer.Options[item]{Source: src}, newRecorder(), nil)
	for i := range 3 {
		select {
		case err := <-res:
			if !errors.Is(err, producer.ErrFeedClosed) {
				t.Fatalf("acquirer %d: %v, want ErrFeedClosed", i, err)
			}
		case <-time.After(deadline):
			t.Fatalf("acquirer %d still blocked after Feed.Close", i)
		}
	}
	h.p.StopFetching()
	waitDone(t, h)
}

// Guarantee: restarts do not stack permit windows: while the processors are
// stalled, a source that keeps failing after fetching its window never has
// more than one window of messages in the stage buffer.
func TestRestartsDoNotStackWindows(t *testing.T) {
	flow := producer.Flow{Initial: 10, Threshold: 5, Refill: 5}
	var runs atomic.Int32
	var stage atomic.Pointer[producer.Stage[item]]
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		runs.Add(1)
		stage.Store(st)
		f := st.NewFeed("partition-0", nil)
		n := f.TryAcquire(1 << 30)
		f.Deliver(items(0, n)...)
		return errors.New("connection reset")
	})
	rec := newRecorder()
	release, blocked := rec.hold()
	h := start(t, "stack", producer.Options[item]{Source: src, Flow: flow,
		Restart: producer.Restart{MaxRestarts: 1000, Window: time.Hour, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}}, rec, nil)
	wait.For(t, "the dispatcher to block on the stalled processors", func() bool { return blocked.Load() > 0 })
	time.Sleep(50 * time.Millisecond) // time for many restarts, if they were allowed
	if n := stage.Load().Buffered(); n > flow.MaxWindow() {
		t.Fatalf("stage buffer holds %d messages of one consumer after %d runs; the window is %d", n, runs.Load(), flow.MaxWindow())
	}
	if r := runs.Load(); r != 1 {
		t.Fatalf("source restarted %d times while its messages were still buffered", r-1)
	}
	release()
	wait.For(t, "a restart once the buffer drained", func() bool { return runs.Load() > 1 })
	h.p.StopFetching()
	waitDone(t, h)
}

// Guarantee: setting the rate limit again (the same or another value) keeps
// the tokens already spent: repeated calls do not hand out fresh bursts.
func TestRepeatedSetRateLimitKeepsTokens(t *testing.T) {
	rec := newRecorder()
	src, feed := feedSource()
	h := start(t, "p", producer.Options[item]{Source: src, RateLimit: &producer.RateLimit{Allowed: 5, Interval: time.Hour}}, rec, nil)
	wait.For(t, "the feed", func() bool { return feed() != nil })
	feed().Deliver(items(0, 100)...)
	wait.For(t, "the first burst", func() bool { return rec.published() == 5 })
	for i := range 20 {
		h.p.SetRateLimit(&producer.RateLimit{Allowed: 5, Interval: time.Hour})
		h.p.SetRateLimit(&producer.RateLimit{Allowed: 5, Interval: time.Hour - time.Duration(i)*time.Second})
	}
	time.Sleep(20 * time.Millisecond)
	if n := rec.published(); n != 5 {
		t.Fatalf("%d messages passed a limit of 5 per hour after repeated SetRateLimit calls", n)
	}
	h.p.SetRateLimit(nil) // lifting it lets the rest through
	wait.For(t, "the rest after lifting the limit", func() bool { return rec.published() == 100 })
	h.cancel()
	waitDone(t, h)
}

// Guarantee: a non-positive max never creates permits: it counts as 1.
func TestAcquireNonPositiveMax(t *testing.T) {
	got := make(chan [3]int, 1)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("f", nil)
		a := f.TryAcquire(-50)
		b, _ := f.Acquire(ctx, 0)
		c := f.TryAcquire(1000)
		got <- [3]int{a, b, c}
		<-ctx.Done()
		return nil
	})
	h := start(t, "max", producer.Options[item]{Source: src}, newRecorder(), nil)
	if r := <-got; r != [3]int{1, 1, producer.DefaultFlowInitial - 2} {
		t.Fatalf("TryAcquire(-50), Acquire(0), TryAcquire(1000) = %v, want [1 1 %d]", r, producer.DefaultFlowInitial-2)
	}
	h.p.StopFetching()
	waitDone(t, h)
}
