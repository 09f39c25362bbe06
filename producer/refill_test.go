package producer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// feedItems returns messages from..to-1 of the named feed.
func feedItems(feed string, from, to int) []*message.Message[item] {
	var msgs []*message.Message[item]
	for i := from; i < to; i++ {
		msgs = append(msgs, message.New(item{Feed: feed, Seq: i}, nil, 0))
	}
	return msgs
}

// thresholdCases are deliveries, in one Deliver call, that bring a fresh
// feed's remaining permits to its Threshold or below once they are charged,
// with the grants the feed gets then.
var thresholdCases = []struct {
	flow    producer.Flow
	deliver int
	grants  []int
}{
	// 10 - 7 = 3 = Threshold: exactly at the threshold, one refill.
	{producer.Flow{Initial: 10, Threshold: 3, Refill: 4}, 7, []int{10, 4}},
	// 20 - 20 = 0, +10 = 10 is still ≤ 15: a second refill in the same charge.
	{producer.Flow{Initial: 20, Threshold: 15, Refill: 10}, 20, []int{20, 10, 10}},
}

// Guarantee: a feed is refilled as soon as its remaining permits fall to
// Threshold (at, not only below it), and refilled again and again while they
// stay at or below Threshold, so after a charge it always has more than
// Threshold permits.
func TestRefillWhileRemainingAtOrBelowThreshold(t *testing.T) {
	for _, tc := range thresholdCases {
		t.Run(flowName(tc.flow), func(t *testing.T) {
			var mu sync.Mutex
			var grants []int
			feeds := make(chan [2]*producer.Feed[item], 1)
			src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
				a := st.NewFeed("a", func(n int) {
					mu.Lock()
					grants = append(grants, n)
					mu.Unlock()
				})
				barrier := st.NewFeed("barrier", func(int) {})
				feeds <- [2]*producer.Feed[item]{a, barrier}
				<-ctx.Done()
				return ctx.Err()
			})
			rec := newRecorder()
			h := start(t, "p", producer.Options[item]{Source: src, Flow: tc.flow}, rec, nil)
			fs := <-feeds
			// One Deliver call: the stage takes, publishes and charges them together.
			fs[0].Deliver(feedItems("a", 0, tc.deliver)...)
			wait.For(t, "feed a's messages to be published", func() bool { return rec.count("a") == tc.deliver })
			// The stage charges a's messages before it dispatches anything
			// delivered afterwards: once the barrier is published, a's refills are done.
			fs[1].Deliver(feedItems("barrier", 0, 1)...)
			wait.For(t, "the barrier to be published", func() bool { return rec.count("barrier") == 1 })
			mu.Lock()
			got := slices.Clone(grants)
			mu.Unlock()
			if !slices.Equal(got, tc.grants) {
				t.Errorf("grants %v after %d messages were dispatched, want %v", got, tc.deliver, tc.grants)
			}
			if st := fs[0].Stats(); st.Remaining <= tc.flow.Threshold {
				t.Errorf("Stats() = %+v after the charge, want Remaining above Threshold = %d", st, tc.flow.Threshold)
			}
			h.p.StopFetching()
			waitDone(t, h)
		})
	}
}

// Guarantee: a feed the source closed accepts nothing: messages delivered to
// it afterwards are dropped, neither counted nor dispatched, and TryDeliver
// tells the source so.
func TestDeliverToClosedFeedIsDropped(t *testing.T) {
	var feed *producer.Feed[item]
	var tookOpen, tookClosed bool
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		feed = st.NewFeed("a", func(int) {})
		tookOpen = feed.TryDeliver(feedItems("a", 0, 3)...)
		feed.Close() // a revoked partition
		feed.Deliver(feedItems("a", 3, 6)...)
		tookClosed = feed.TryDeliver(feedItems("a", 6, 9)...)
		return nil // exhausted
	})
	rec := newRecorder()
	h := start(t, "closed", producer.Options[item]{Source: src}, rec, nil)
	waitDone(t, h) // the buffer has been dispatched
	if got := rec.seqs("a"); !slices.Equal(got, seqRange(3)) {
		t.Errorf("published %v, want only the 3 messages delivered before Close", got)
	}
	if st := feed.Stats(); st.Delivered != 3 || st.Dispatched != 3 {
		t.Errorf("Stats() = %+v, want Delivered = Dispatched = 3", st)
	}
	if !tookOpen || tookClosed {
		t.Errorf("TryDeliver reported %v on the open feed and %v on the closed one, want true and false", tookOpen, tookClosed)
	}
}

// Guarantee: permits granted at once to a pull feed reach every goroutine
// waiting in Acquire, not only the one woken first, as soon as they are
// granted.
func TestRefillReachesEveryAcquirer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flow := producer.Flow{Initial: 10, Threshold: 5, Refill: 5}
		feeds := make(chan *producer.Feed[item], 1)
		src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
			feeds <- st.NewFeed("f", nil)
			<-ctx.Done()
			return nil
		})
		h := start(t, "acquirers", producer.Options[item]{Source: src, Flow: flow}, newRecorder(), nil)
		f := <-feeds
		n := f.TryAcquire(1 << 30) // the initial window
		var acquired atomic.Int32
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, err := f.Acquire(context.Background(), 1); err == nil {
					acquired.Add(1)
				}
			})
		}
		synctest.Wait() // both wait in Acquire
		// Dispatching 5 of the 10 takes the feed to Threshold: a refill of 5,
		// enough for both acquirers.
		f.Deliver(feedItems("f", 0, n-flow.Threshold)...)
		synctest.Wait() // no time passes: the refill alone must wake them
		if got := acquired.Load(); got != 2 {
			t.Errorf("%d of 2 acquirers got a permit once the refill of %d was granted, want both", got, flow.Refill)
		}
		h.p.StopFetching() // closes the feed: an acquirer still waiting returns
		wg.Wait()
		waitDone(t, h)
	})
}

// Guarantee: the doubling restart backoff never exceeds MaxBackoff.
func TestRestartBackoffCappedAtMaxBackoff(t *testing.T) {
	const backoff = 20 * time.Millisecond
	src := &scriptedSource{script: func(ctx context.Context, call int) error {
		if call <= 6 {
			return fmt.Errorf("broker unreachable (%d)", call)
		}
		<-ctx.Done()
		return nil
	}}
	h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 10, Window: time.Hour, Backoff: backoff, MaxBackoff: backoff}}, newRecorder(), nil)
	wait.For(t, "the seventh Run call", func() bool { return src.calls() == 7 })
	for i, g := range src.gaps() {
		// Uncapped, the fifth restart would wait 16 × 20ms = 320ms.
		if g < backoff || g > 10*backoff {
			t.Errorf("restart %d came %v after the failure, want the capped backoff of %v", i+1, g, backoff)
		}
	}
	h.p.StopFetching()
	waitDone(t, h)
}

// Guarantee: a Run that returns an error because its context was cancelled
// (the stage is stopping) does not count as a failure: stopping a source
// that restarted recently never ends in a *RestartError.
func TestStoppingIsNotAFailure(t *testing.T) {
	src := &scriptedSource{script: func(ctx context.Context, call int) error {
		if call == 1 {
			return errors.New("connection reset")
		}
		<-ctx.Done()
		return ctx.Err() // what most sources return when told to stop
	}}
	h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 1, Window: time.Hour, Backoff: time.Millisecond}}, newRecorder(), nil)
	wait.For(t, "the restart", func() bool { return src.calls() == 2 })
	h.p.StopFetching()
	waitDone(t, h)
	if errs := h.fatalErrs(); len(errs) != 0 {
		t.Errorf("fatal called with %v when the source was only told to stop", errs)
	}
}
