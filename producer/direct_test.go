package producer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// tryRecorder is a recorder that can also take messages without waiting,
// as the pipeline's processors do: each TryPublish takes a random prefix,
// so deliveries go partly straight to it and partly through the stage
// buffer.
type tryRecorder struct {
	*recorder
	direct atomic.Int64 // messages taken by TryPublish
}

func (r *tryRecorder) TryPublish(msgs []*message.Message[item]) (int, error) {
	k := rand.IntN(len(msgs) + 1)
	if k == 0 {
		return 0, nil
	}
	if r.before != nil {
		if err := r.before(context.Background(), msgs[:k]); err != nil {
			return 0, nil
		}
	}
	r.mu.Lock()
	for _, m := range msgs[:k] {
		r.byFeed[m.Data.Feed] = append(r.byFeed[m.Data.Feed], m.Data.Seq)
	}
	r.total += k
	r.calls = append(r.calls, call{at: time.Now(), size: k})
	r.mu.Unlock()
	r.direct.Add(int64(k))
	return k, nil
}

// Guarantee: with an Output that takes messages without waiting, deliveries
// go straight to it as far as it has room and the rest through the stage
// buffer, and the window still holds: every message is published once, in
// delivery order per feed, permits are charged when a message leaves, and
// refills are exactly Refill.
func TestDirectHandOffKeepsOrderAndWindow(t *testing.T) {
	for _, flow := range flows {
		t.Run(flowName(flow), func(t *testing.T) {
			rec := &tryRecorder{recorder: newRecorder()}
			rec.jitter = true
			src := &brokerSource{feedsPerStage: 3, perFeed: 400}
			src.watchWindows(rec.recorder)
			h := start(t, "p", producer.Options[item]{Source: src, Flow: flow, Concurrency: 2}, rec, nil)
			waitDone(t, h)
			verifyFlow(t, src, rec.recorder, flow.WithDefaults(), 6)
			if d := rec.direct.Load(); d == 0 || d == int64(rec.published()) {
				t.Fatalf("%d of %d messages went straight to the Output: the test must exercise both paths", d, rec.published())
			}
		})
	}
}

// lockingSource delivers while holding its own mutex, which its grant
// callback takes too: a callback run inside Deliver would deadlock.
type lockingSource struct {
	producer.Basic
	n       int
	mu      sync.Mutex
	permits int
	wake    chan struct{}
}

func (s *lockingSource) grant(n int) {
	s.mu.Lock()
	s.permits += n
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *lockingSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	feed := st.NewFeed("locked", s.grant)
	for sent := 0; sent < s.n; {
		s.mu.Lock()
		k := min(s.permits, s.n-sent)
		s.permits -= k
		msgs := make([]*message.Message[item], k)
		for i := range msgs {
			msgs[i] = message.New(item{Feed: "locked", Seq: sent + i}, nil, uint64(sent+i))
		}
		if k > 0 {
			feed.Deliver(msgs...) // with s.mu held
		}
		s.mu.Unlock()
		sent += k
		if k == 0 {
			select {
			case <-s.wake:
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}

// Guarantee: a refill earned by a direct hand-off is granted by the stage's
// own goroutine, never inside the source's Deliver call, so a source may
// hold the lock its grant callback takes while it delivers.
func TestDirectHandOffGrantsOutsideDeliver(t *testing.T) {
	rec := &tryRecorder{recorder: newRecorder()}
	src := &lockingSource{n: 2000, wake: make(chan struct{}, 1)}
	h := start(t, "p", producer.Options[item]{Source: src, Flow: producer.Flow{Initial: 10, Threshold: 3, Refill: 7}}, rec, nil)
	waitDone(t, h)
	if got := rec.published(); got != src.n {
		t.Fatalf("%d messages published, want %d", got, src.n)
	}
	if rec.direct.Load() == 0 {
		t.Fatal("no message went straight to the Output")
	}
}

// roomyRecorder is a recorder that can take messages without waiting and
// always has room: TryPublish takes every message it is offered.
type roomyRecorder struct{ *recorder }

func (r roomyRecorder) TryPublish(msgs []*message.Message[item]) (int, error) {
	return r.Publish(context.Background(), msgs)
}

// Guarantee: a rate limit holds for deliveries that find the stage buffer
// empty and the processors with room: they wait for the bucket like the
// buffered ones, and never pass it by.
func TestRateLimitHoldsWhenTheProcessorsHaveRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := roomyRecorder{newRecorder()}
		src, feed := feedSource()
		h := start(t, "p", producer.Options[item]{Source: src, RateLimit: &producer.RateLimit{Allowed: 5, Interval: time.Hour}}, rec, nil)
		synctest.Wait()
		for i := range 20 {
			feed().Deliver(items(i, i+1)...)
			synctest.Wait()
		}
		if got := rec.published(); got != 5 {
			t.Fatalf("%d messages published within the first interval, the limit allows 5", got)
		}
		h.p.SetRateLimit(nil)
		synctest.Wait()
		if got := rec.seqs("only"); !slices.Equal(got, seqRange(20)) {
			t.Fatalf("published %v once the limit was lifted, want the 20 messages in order", got)
		}
		h.cancel()
		waitDone(t, h)
	})
}

// Guarantee: after the pipeline's hard stop, a message the source still
// delivers never reaches the processors, even when they have room: it stays
// unacknowledged and is counted in Unhandled.
func TestDeliveryAfterHardStopIsUnhandled(t *testing.T) {
	rec := roomyRecorder{newRecorder()}
	var st *producer.Stage[item]
	src := producer.SourceFunc[item](func(ctx context.Context, s *producer.Stage[item]) error {
		st = s
		f := s.NewFeed("only", func(int) {})
		f.Deliver(items(0, 1)...)
		<-ctx.Done()
		f.Deliver(items(1, 4)...)
		return ctx.Err()
	})
	h := start(t, "p", producer.Options[item]{Source: src}, rec, nil)
	wait.For(t, "the first message to be published", func() bool { return rec.published() == 1 })
	h.cancel()
	waitDone(t, h)
	if got := rec.published(); got != 1 {
		t.Errorf("%d messages published, want only the one delivered before the hard stop", got)
	}
	if got := st.Unhandled(); got != 3 {
		t.Errorf("Unhandled = %d, want the 3 messages delivered after the hard stop", got)
	}
}

// Guarantee: a delivery that goes straight to processors with room refills
// its feed as one through the stage buffer does, for push- and pull-model
// feeds alike: as soon as the remaining permits fall to Threshold (at, not
// only below it), and again while they stay at or below it.
func TestDirectHandOffRefillsAtTheThreshold(t *testing.T) {
	for _, tc := range thresholdCases {
		for _, pull := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pull=%v", flowName(tc.flow), pull), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var mu sync.Mutex
					var grants []int
					grant := func(n int) {
						mu.Lock()
						grants = append(grants, n)
						mu.Unlock()
					}
					if pull {
						grant = nil
					}
					feeds := make(chan *producer.Feed[item], 1)
					src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
						feeds <- st.NewFeed("only", grant)
						<-ctx.Done()
						return ctx.Err()
					})
					rec := roomyRecorder{newRecorder()}
					h := start(t, "p", producer.Options[item]{Source: src, Flow: tc.flow}, rec, nil)
					f := <-feeds
					if pull && f.TryAcquire(tc.flow.Initial) != tc.flow.Initial {
						t.Fatalf("the feed holds fewer than its Initial %d permits", tc.flow.Initial)
					}
					f.Deliver(items(0, tc.deliver)...)
					synctest.Wait()
					mu.Lock()
					got := slices.Clone(grants)
					mu.Unlock()
					want := tc.grants
					if pull {
						// The refills accumulate in the feed.
						got = []int{tc.flow.Initial, f.TryAcquire(1 << 20)}
						want = []int{tc.flow.Initial, sumOf(tc.grants[1:])}
					}
					if !slices.Equal(got, want) {
						t.Errorf("grants %v after %d messages went straight to the processors, want %v", got, tc.deliver, want)
					}
					if st := f.Stats(); st.Remaining <= tc.flow.Threshold || st.Dispatched != tc.deliver {
						t.Errorf("Stats() = %+v, want %d dispatched and Remaining above Threshold = %d", st, tc.deliver, tc.flow.Threshold)
					}
					h.p.StopFetching()
					waitDone(t, h)
				})
			})
		}
	}
}

func sumOf(ns []int) int {
	s := 0
	for _, n := range ns {
		s += n
	}
	return s
}

// Guarantee: refills that fall due through direct hand-offs while the stage
// is granting earlier ones are all granted, each feed's once: none is lost
// or taken for another's, however many rounds of refills follow.
func TestRefillsFallingDueDuringARefillAreAllGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
		names := []string{"e", "c", "d", "a", "b"}
		// e's and c's refills hold the stage's refilling until the test
		// lets them go on: while e's is granted, c and d fall due; while
		// c's is granted, a and b.
		in := map[string]chan struct{}{"e": make(chan struct{}), "c": make(chan struct{})}
		cont := map[string]chan struct{}{"e": make(chan struct{}), "c": make(chan struct{})}
		var mu sync.Mutex
		grants := map[string][]int{}
		feeds := make(chan map[string]*producer.Feed[item], 1)
		src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
			fs := map[string]*producer.Feed[item]{}
			for _, name := range names {
				fs[name] = st.NewFeed(name, func(n int) {
					mu.Lock()
					grants[name] = append(grants[name], n)
					refill := len(grants[name]) == 2
					mu.Unlock()
					if refill && in[name] != nil {
						close(in[name])
						<-cont[name]
					}
				})
			}
			feeds <- fs
			<-ctx.Done()
			return ctx.Err()
		})
		h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, roomyRecorder{newRecorder()}, nil)
		fs := <-feeds
		due := func(name string) { fs[name].Deliver(feedItems(name, 0, flow.Initial-flow.Threshold)...) }
		due("e")
		<-in["e"]
		due("c")
		due("d")
		close(cont["e"])
		<-in["c"]
		due("a")
		due("b")
		close(cont["c"])
		synctest.Wait()
		for _, name := range names {
			mu.Lock()
			got := slices.Clone(grants[name])
			mu.Unlock()
			if want := []int{flow.Initial, flow.Refill}; !slices.Equal(got, want) {
				t.Errorf("feed %s got grants %v, want %v", name, got, want)
			}
		}
		h.p.StopFetching()
		waitDone(t, h)
	})
}
