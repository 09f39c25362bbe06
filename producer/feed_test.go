package producer_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// pullSource fetches with Feed.Acquire (no grant callback), like a Kafka
// partition loop, and checks the window after every acquisition.
type pullSource struct {
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

// Guarantee: a source that delivers more than it was granted is reported
// (logged once and counted), and its messages are still dispatched.
func TestOverdeliveryIsReported(t *testing.T) {
	log, lines := newLogRecorder()
	var stats atomic.Pointer[producer.FeedStats]
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("greedy", func(int) {})
		f.Deliver(items(0, 150)...) // 150 > Initial (100)
		s := f.Stats()
		stats.Store(&s)
		return nil
	})
	rec := newRecorder()
	h := start(t, "greedy", producer.Options[item]{Source: src}, rec, log)
	waitDone(t, h)
	if rec.published() != 150 {
		t.Fatalf("published %d, want all 150", rec.published())
	}
	if s := stats.Load(); s.Overdelivered != 50 {
		t.Fatalf("Overdelivered = %d, want 50", s.Overdelivered)
	}
	n := 0
	for _, l := range lines() {
		if strings.Contains(l, "more messages than it was granted") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("over-delivery logged %d times, want once", n)
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
