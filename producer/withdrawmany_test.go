package producer_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// manyFeeds starts a stage with a blocked Output and n feeds named f0..,
// each of which has delivered per messages (seq 0..per-1, delivered round
// by round, so that the feeds' messages interleave in the buffer) that all
// wait in the stage buffer: the dispatcher holds a first chunk of feed
// "x". It returns the stage, the n feeds and a function that lets the
// stage finish.
func manyFeeds(t *testing.T, n, per int) (*producer.Stage[item], []*producer.Feed[item], *recorder, func()) {
	t.Helper()
	rec := newRecorder()
	release, blocked := rec.hold()
	names := make([]string, n+1)
	names[0] = "x"
	for i := range n {
		names[i+1] = "f" + strconv.Itoa(i)
	}
	src := newWithdrawSource(names...)
	flow := producer.Flow{Initial: max(per, 64), Threshold: 1, Refill: 1}
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, rec, nil)
	st, feeds := <-src.stage, <-src.ready
	deliver(t, feeds[0], 0, 64)
	wait.For(t, "the dispatcher to block on x's chunk", func() bool { return blocked.Load() == 1 && st.Buffered() == 0 })
	feeds = feeds[1:]
	for r := range per {
		for _, f := range feeds {
			msg := message.New(item{Feed: f.Name(), Seq: r}, nil, 0)
			f.Deliver(msg)
		}
	}
	if got := st.Buffered(); got != n*per {
		t.Fatalf("Buffered = %d, want %d", got, n*per)
	}
	return st, feeds, rec, func() {
		release()
		close(src.done)
		waitDone(t, h)
	}
}

// Guarantee: feeds that withdraw at the same time (the partitions a
// rebalance or a stop lets go of together) share one pass over the stage
// buffer: n feeds withdrawing from a buffer of B messages visit at most
// B + n entries in all, not up to n × B, and each still gets back exactly
// its own messages, in delivery order, none of them dispatched.
func TestFeedsWithdrawingTogetherShareOnePassOverTheBuffer(t *testing.T) {
	const n, per = 200, 10
	st, feeds, rec, finish := manyFeeds(t, n, per)
	before := producer.WithdrawScanned(st)
	unlock := producer.LockStage(st)
	got := make([][]*message.Message[item], n)
	var wg sync.WaitGroup
	for i, f := range feeds {
		wg.Go(func() { got[i] = f.WithdrawAppend(nil) })
	}
	wait.For(t, "every withdrawal to wait for the stage", func() bool { return producer.WithdrawWaiting(st) == n },
		func() string { return fmt.Sprintf("%d of %d waiting", producer.WithdrawWaiting(st), n) })
	unlock()
	wg.Wait()
	if visited, bound := producer.WithdrawScanned(st)-before, uint64(n*per+n); visited > bound {
		t.Errorf("%d feeds withdrawing together from a buffer of %d messages visited %d entries, want at most %d (one pass)",
			n, n*per, visited, bound)
	}
	for i, w := range got {
		if s := seqsOf(w); !slices.Equal(s, seqRange(per)) {
			t.Fatalf("feed %s withdrew %s, want its %d messages in order", feeds[i].Name(), abbrev(s), per)
		}
		if st := feeds[i].Stats(); st.Withdrawn != per {
			t.Fatalf("feed %s: Withdrawn = %d, want %d", feeds[i].Name(), st.Withdrawn, per)
		}
	}
	if b := st.Buffered(); b != 0 {
		t.Fatalf("Buffered = %d after every feed withdrew, want 0", b)
	}
	finish()
	if got := rec.seqs("x"); !slices.Equal(got, seqRange(64)) {
		t.Fatalf("x dispatched %s, want x0..x63", abbrev(got))
	}
	if total := rec.published(); total != 64 {
		t.Fatalf("%d messages dispatched, want only x's 64 (the rest was withdrawn)", total)
	}
}

// Guarantee: many feeds released at once, each withdrawing on a goroutine
// of its own (as a Kafka member lets go of its partitions), each get back
// exactly their own messages, in order, however their withdrawals overlap.
// With BOULEVARD_SCALE_PARTITIONS set, it runs that many feeds, each with
// a full default window (100) buffered, and logs how long withdrawing them
// all took.
func TestManyFeedsReleasedAtOnceEachWithdrawTheirOwnMessages(t *testing.T) {
	n, per := 64, 20
	if v, err := strconv.Atoi(os.Getenv("BOULEVARD_SCALE_PARTITIONS")); err == nil && v > 0 {
		n, per = v, 100
	}
	st, feeds, _, finish := manyFeeds(t, n, per)
	got := make([][]*message.Message[item], n)
	var wg sync.WaitGroup
	start := time.Now()
	for i, f := range feeds {
		wg.Go(func() { got[i] = f.WithdrawAppend(nil) })
	}
	wg.Wait()
	took := time.Since(start)
	for i, w := range got {
		if s := seqsOf(w); !slices.Equal(s, seqRange(per)) {
			t.Fatalf("feed %s withdrew %s, want its %d messages in order", feeds[i].Name(), abbrev(s), per)
		}
	}
	if b := st.Buffered(); b != 0 {
		t.Fatalf("Buffered = %d after every feed withdrew, want 0", b)
	}
	t.Logf("%d feeds with %d buffered messages each withdrew them in %v (%d entries visited)",
		n, per, took, producer.WithdrawScanned(st))
	finish()
}

// Guarantee: two withdrawals of one feed waiting for the stage at the same
// time act as if they ran one after the other: the first gets back every
// buffered message of the feed, in order, and the second none.
func TestAFeedsWithdrawalsWaitingTogetherActInTurn(t *testing.T) {
	const per = 5
	st, feeds, _, finish := manyFeeds(t, 1, per)
	f := feeds[0]
	unlock := producer.LockStage(st)
	var first, second []*message.Message[item]
	var wg sync.WaitGroup
	wg.Go(func() { first = f.WithdrawAppend(nil) })
	wait.For(t, "the first withdrawal to wait for the stage", func() bool { return producer.WithdrawWaiting(st) == 1 })
	wg.Go(func() { second = f.WithdrawAppend(nil) })
	wait.For(t, "the second withdrawal to wait for the stage", func() bool { return producer.WithdrawWaiting(st) == 2 })
	unlock()
	wg.Wait()
	if !slices.Equal(seqsOf(first), seqRange(per)) || len(second) != 0 {
		t.Fatalf("the first withdrawal got %v and the second %v, want the first all %d in order and the second none",
			seqsOf(first), seqsOf(second), per)
	}
	finish()
}
