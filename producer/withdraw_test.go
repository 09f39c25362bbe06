package producer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// withdrawSource registers the named feeds (pull model) and hands them to
// the test, then waits until the test lets Run return (nil: exhausted) or the
// stage stops fetching.
type withdrawSource struct {
	producer.Basic
	names []string
	ready chan []*producer.Feed[item]
	stage chan *producer.Stage[item]
	done  chan struct{}
}

func newWithdrawSource(names ...string) *withdrawSource {
	return &withdrawSource{names: names, ready: make(chan []*producer.Feed[item], 1),
		stage: make(chan *producer.Stage[item], 1), done: make(chan struct{})}
}

func (s *withdrawSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	feeds := make([]*producer.Feed[item], len(s.names))
	for i, n := range s.names {
		feeds[i] = st.NewFeed(n, nil)
	}
	s.stage <- st
	s.ready <- feeds
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deliver acquires n permits of f and delivers messages seq from..from+n-1.
func deliver(t *testing.T, f *producer.Feed[item], from, n int) {
	t.Helper()
	for n > 0 {
		k, err := f.Acquire(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		msgs := make([]*message.Message[item], k)
		for i := range msgs {
			msgs[i] = message.New(item{Feed: f.Name(), Seq: from + i}, nil, 0)
		}
		f.Deliver(msgs...)
		from += k
		n -= k
	}
}

// deliverAgain delivers messages seq from..from+n-1 without acquiring: the
// permits of withdrawn messages.
func deliverAgain(f *producer.Feed[item], from, n int) {
	msgs := make([]*message.Message[item], n)
	for i := range msgs {
		msgs[i] = message.New(item{Feed: f.Name(), Seq: from + i}, nil, 0)
	}
	f.Deliver(msgs...)
}

func seqsOf(msgs []*message.Message[item]) []int {
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = m.Data.Seq
	}
	return out
}

// Guarantee: Withdraw removes exactly the feed's messages still waiting in
// the stage buffer, in delivery order; the chunk being handed over and the
// other feeds' messages are dispatched as usual, in order; withdrawn
// messages are never dispatched and are not charged to the window.
func TestWithdrawRemovesOnlyTheFeedsBufferedMessages(t *testing.T) {
	rec := newRecorder()
	release, blocked := rec.hold()
	src := newWithdrawSource("a", "b")
	flow := producer.Flow{Initial: 200, Threshold: 10, Refill: 10}
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, rec, nil)
	st, feeds := <-src.stage, <-src.ready
	a, b := feeds[0], feeds[1]
	// The dispatcher takes a0-9 and blocks on them in the Output; then
	// everything else waits in the stage buffer.
	deliver(t, a, 0, 10)
	wait.For(t, "the dispatcher to block on a0-9", func() bool { return blocked.Load() == 1 && st.Buffered() == 0 })
	deliver(t, b, 0, 10)
	for i := 10; i < 150; i += 10 {
		deliver(t, a, i, 10)
		deliver(t, b, i, 10)
	}
	if got := st.Buffered(); got != 290 {
		t.Fatalf("Buffered = %d, want 290", got)
	}

	withdrawn := a.WithdrawAppend(nil)
	if want := seqRange(150)[10:]; !slices.Equal(seqsOf(withdrawn), want) {
		t.Fatalf("withdrawn %s, want a10..a149 in order", abbrev(seqsOf(withdrawn)))
	}
	if got := st.Buffered(); got != 150 {
		t.Fatalf("Buffered = %d after withdrawing 140, want b's 150", got)
	}
	if n := a.Withdraw(); n != 0 {
		t.Fatalf("second Withdraw removed %d, want 0", n)
	}

	release()
	wait.For(t, "b to be dispatched", func() bool { return rec.count("b") == 150 })
	close(src.done)
	waitDone(t, h)
	if got := rec.seqs("a"); !slices.Equal(got, seqRange(10)) {
		t.Fatalf("a dispatched %s, want a0..a9 only (the rest was withdrawn)", abbrev(got))
	}
	if got := rec.seqs("b"); !slices.Equal(got, seqRange(150)) {
		t.Fatalf("b dispatched %s, want b0..b149 in order", abbrev(got))
	}
	sa := a.Stats()
	if sa.Withdrawn != 140 || sa.Dispatched != 10 || sa.Delivered != 150 || sa.Overdelivered != 0 {
		t.Fatalf("a's stats %+v, want Withdrawn 140, Dispatched 10, Delivered 150, Overdelivered 0", sa)
	}
	// Only dispatched messages are charged: 10 of the 150 permits used.
	if sa.Remaining != sa.Granted-10 {
		t.Fatalf("a's Remaining = %d, Granted = %d: withdrawn messages were charged", sa.Remaining, sa.Granted)
	}
	if sb := b.Stats(); sb.Withdrawn != 0 || sb.Dispatched != 150 {
		t.Fatalf("b's stats %+v, want nothing withdrawn and 150 dispatched", sb)
	}
}

// Guarantee: the permits of withdrawn messages are the source's again: it
// may deliver that many messages without a new grant, and this is not
// reported as over-delivery; the redelivered messages are dispatched after
// what the feed delivered before and was not withdrawn.
func TestWithdrawnPermitsMayBeUsedAgain(t *testing.T) {
	rec := newRecorder()
	release, blocked := rec.hold()
	src := newWithdrawSource("a")
	flow := producer.Flow{Initial: 100, Threshold: 10, Refill: 10}
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, rec, nil)
	st, feeds := <-src.stage, <-src.ready
	a := feeds[0]
	deliver(t, a, 0, 100) // the whole window
	wait.For(t, "the dispatcher to block", func() bool { return blocked.Load() == 1 && st.Buffered() == 36 })
	n := a.Withdraw()
	if n != 36 {
		t.Fatalf("Withdraw = %d, want 36 (100 delivered, 64 in the blocked chunk)", n)
	}
	if got := a.TryAcquire(100); got != 0 {
		t.Fatalf("TryAcquire = %d after Withdraw: withdrawn permits must not be granted again", got)
	}
	deliverAgain(a, 64, n)
	release()
	wait.For(t, "everything to be dispatched", func() bool { return rec.count("a") == 100 })
	close(src.done)
	waitDone(t, h)
	if got := rec.seqs("a"); !slices.Equal(got, seqRange(100)) {
		t.Fatalf("dispatched %s, want a0..a99 in order", abbrev(got))
	}
	if s := a.Stats(); s.Overdelivered != 0 || s.Withdrawn != 36 || s.Delivered != 136 || s.Dispatched != 100 {
		t.Fatalf("stats %+v, want Overdelivered 0, Withdrawn 36, Delivered 136, Dispatched 100", s)
	}
}

// Guarantee: a stage whose buffer Withdraw emptied does not wait for the
// withdrawn messages: an exhausted source finishes once the chunk in flight
// is dispatched; Withdraw on a closed feed still works, and on a feed with
// nothing buffered returns 0.
func TestWithdrawEmptiedBufferLetsTheStageFinish(t *testing.T) {
	rec := newRecorder()
	release, blocked := rec.hold()
	src := newWithdrawSource("a", "idle")
	h := start(t, "p", producer.Options[item]{Source: src, Flow: producer.Flow{Initial: 100}}, rec, nil)
	st, feeds := <-src.stage, <-src.ready
	a := feeds[0]
	deliver(t, a, 0, 100)
	wait.For(t, "the dispatcher to block", func() bool { return blocked.Load() == 1 })
	if n := feeds[1].Withdraw(); n != 0 {
		t.Fatalf("Withdraw of a feed with nothing buffered = %d, want 0", n)
	}
	a.Close()
	if n := a.Withdraw(); n != 36 {
		t.Fatalf("Withdraw on the closed feed = %d, want 36", n)
	}
	if st.Buffered() != 0 {
		t.Fatalf("Buffered = %d, want 0", st.Buffered())
	}
	close(src.done)
	release()
	waitDone(t, h)
	if got := rec.count("a"); got != 64 {
		t.Fatalf("%d messages dispatched, want the 64 of the chunk in flight", got)
	}
}

// Guarantee: under concurrent delivery, dispatch and Withdraw, every
// delivered message is either dispatched or withdrawn, exactly once, and a
// feed's dispatched messages keep their delivery order.
func TestWithdrawConcurrentWithDispatch(t *testing.T) {
	rec := newRecorder()
	rec.jitter = true
	names := []string{"a", "b", "c"}
	src := newWithdrawSource(names...)
	h := start(t, "p", producer.Options[item]{Source: src, Flow: producer.Flow{Initial: 64}}, rec, nil)
	<-src.stage
	feeds := <-src.ready
	const perFeed = 3000
	var mu sync.Mutex
	withdrawn := map[string][]int{}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var wg sync.WaitGroup
	for _, f := range feeds {
		wg.Go(func() {
			seq, credit := 0, 0 // credit: permits of withdrawn messages
			for seq < perFeed {
				k := min(credit, rand.IntN(20)+1)
				if k > 0 {
					credit -= k
				} else {
					var err error
					if k, err = f.Acquire(ctx, rand.IntN(20)+1); err != nil {
						t.Error(err)
						return
					}
				}
				k = min(k, perFeed-seq)
				deliverAgain(f, seq, k)
				seq += k
				if rand.IntN(8) == 0 {
					w := f.WithdrawAppend(nil)
					credit += len(w)
					mu.Lock()
					withdrawn[f.Name()] = append(withdrawn[f.Name()], seqsOf(w)...)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(src.done)
	waitDone(t, h)
	total := 0
	for i, name := range names {
		got := rec.seqs(name)
		if !slices.IsSorted(got) {
			t.Fatalf("feed %s dispatched out of order: %s", name, abbrev(got))
		}
		all := append(slices.Clone(got), withdrawn[name]...)
		slices.Sort(all)
		if !slices.Equal(all, seqRange(perFeed)) {
			t.Fatalf("feed %s: %d dispatched + %d withdrawn are not each message exactly once", name, len(got), len(withdrawn[name]))
		}
		if s := feeds[i].Stats(); s.Dispatched != len(got) || s.Withdrawn != len(withdrawn[name]) {
			t.Fatalf("feed %s stats %+v, want Dispatched %d, Withdrawn %d", name, s, len(got), len(withdrawn[name]))
		}
		total += len(withdrawn[name])
	}
	t.Logf("%d of %d messages withdrawn", total, perFeed*len(names))
}

// gatedPrinter stands for busy processors: its first Publish signals entered
// and waits for release, then it notes what it is handed.
type gatedPrinter struct {
	entered, release chan struct{}
	once             sync.Once
	log              *[]string // written by one goroutine at a time, in turn
}

func (g *gatedPrinter) Publish(_ context.Context, msgs []*message.Message[string]) (int, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	for _, m := range msgs {
		*g.log = append(*g.log, "processing "+m.Data)
	}
	return len(msgs), nil
}

// Guarantee: a consumer that loses its messages' ownership (a revoked
// partition) takes back what still waits in the stage buffer: those messages
// are never dispatched, get no outcome and are not charged to the window;
// what was already handed to the processors goes on.
func TestFeedWithdrawTakesBackTheBuffer(t *testing.T) {
	var lines []string
	out := &gatedPrinter{entered: make(chan struct{}), release: make(chan struct{}), log: &lines}
	var feed *producer.Feed[string]
	src := producer.SourceFunc[string](func(ctx context.Context, stage *producer.Stage[string]) error {
		feed = stage.NewFeed("partition-0", nil)
		n, err := feed.Acquire(ctx, 5)
		if err != nil {
			return err
		}
		feed.Deliver(message.New("record-0", nil, 0))
		<-out.entered // the processors hold record-0
		for i := 1; i < n; i++ {
			feed.Deliver(message.New(fmt.Sprintf("record-%d", i), nil, uint64(i)))
		}
		// The partition is revoked: take back what was not dispatched.
		for _, m := range feed.WithdrawAppend(nil) {
			lines = append(lines, "withdrawn "+m.Data)
		}
		close(out.release)
		return nil
	})
	p := producer.New(producer.Options[string]{Source: src, Flow: producer.Flow{Initial: 5}}.WithDefaults(),
		producer.Config[string]{Name: "example", Output: out})
	var wg sync.WaitGroup
	p.Start(context.Background(), &wg, func(err error) { t.Errorf("gave up: %v", err) })
	<-p.Done()
	wg.Wait()
	st := feed.Stats()
	lines = append(lines, fmt.Sprintf("delivered %d, dispatched %d, withdrawn %d", st.Delivered, st.Dispatched, st.Withdrawn))
	want := []string{
		"withdrawn record-1",
		"withdrawn record-2",
		"withdrawn record-3",
		"withdrawn record-4",
		"processing record-0",
		"delivered 5, dispatched 1, withdrawn 4",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// Guarantee: messages withdrawn while the stage waits for rate-limit tokens
// for them are never dispatched: the tokens that come then pass only what
// is still buffered.
func TestWithdrawWhileWaitingForTheRateLimitDispatchesNothingWithdrawn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		src := newWithdrawSource("a")
		h := start(t, "p", producer.Options[item]{Source: src, RateLimit: &producer.RateLimit{Allowed: 2, Interval: time.Hour}}, rec, nil)
		feeds := <-src.ready
		a := feeds[0]
		deliver(t, a, 0, 2) // the bucket's 2 tokens
		deliver(t, a, 2, 10)
		synctest.Wait() // the stage waits for the next tokens
		if got := rec.published(); got != 2 {
			t.Fatalf("%d messages published, the bucket holds 2", got)
		}
		if n := a.Withdraw(); n != 10 {
			t.Fatalf("Withdraw removed %d, want the 10 waiting for tokens", n)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		deliverAgain(a, 2, 1)
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := rec.seqs("a"); !slices.Equal(got, seqRange(3)) {
			t.Fatalf("published %v, want a0, a1, then a2 delivered again after the withdrawal", got)
		}
		close(src.done)
		waitDone(t, h)
	})
}

// Guarantee: a source restarted after a failure starts as soon as the
// failed run's messages are gone from the stage buffer, also when they go
// by a withdrawal while the stage waits for rate-limit tokens for them.
func TestRestartFollowsAWithdrawalThatEmptiesTheBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		feeds := make(chan *producer.Feed[item], 2)
		src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
			f := st.NewFeed("only", nil)
			feeds <- f
			if call == 1 {
				deliver(t, f, 0, 10)
				return errors.New("connection reset")
			}
			<-ctx.Done()
			return ctx.Err()
		}}
		h := start(t, "p", producer.Options[item]{Source: src, RateLimit: &producer.RateLimit{Allowed: 2, Interval: time.Hour}}, rec, nil)
		first := <-feeds
		time.Sleep(time.Minute) // past the backoff: the stage waits for the buffer to empty
		synctest.Wait()
		if n := src.calls(); n != 1 {
			t.Fatalf("Run called %d times while the failed run's messages wait for tokens, want 1", n)
		}
		start := time.Now()
		if n := first.Withdraw(); n != 8 {
			t.Fatalf("Withdraw removed %d, want the 8 the bucket has no tokens for", n)
		}
		<-feeds
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the source was restarted %v after the withdrawal emptied the buffer, want at once", waited)
		}
		h.cancel()
		waitDone(t, h)
	})
}
