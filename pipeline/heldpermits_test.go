package pipeline_test

import (
	"context"
	"log/slog"
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
)

// partialFetchSource is a pull-model source whose fetches return fewer
// messages than it asks for: each fetch returns one in three of what the
// source may deliver (at least one, at most what is left). carry keeps the
// permits a fetch did not use, as Feed.Acquire's documentation shows;
// without it they are dropped.
func partialFetchSource(total int, carry bool, rec *acker.Recorder) *countingSource {
	return &countingSource{run: func(ctx context.Context, st *producer.Stage[uint64], _ int) error {
		feed := st.NewFeed("partial", nil)
		have, next := 0, 0
		for next < total {
			if have == 0 || !carry {
				n, err := feed.Acquire(ctx, 100)
				if err != nil {
					return nil
				}
				have = n
			}
			k := min(max(have/3, 1), total-next)
			msgs := make([]*message.Message[uint64], k)
			for i := range msgs {
				msgs[i] = message.New(uint64(next), rec, uint64(next))
				next++
			}
			feed.Deliver(msgs...)
			have -= k
		}
		<-ctx.Done()
		return nil
	}}
}

// Guarantee: a pull-model source that keeps the permits its fetches did
// not use delivers everything, with no warning; one that drops them, and
// so waits in Acquire for permits no delivered message will refill, is
// told so in one warning naming how many permits it holds, once it has
// waited HeldPermitsPatience.
func TestASourceHoldingUndeliveredPermitsIsWarnedOnce(t *testing.T) {
	for _, carry := range []bool{true, false} {
		name := map[bool]string{true: "keeps the rest", false: "drops the rest"}[carry]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const total = 1000
				var lines logtest.Lines
				rec := acker.NewRecorder(false)
				stop := startHeldPermits(t, "partial", partialFetchSource(total, carry, rec), &lines)
				synctest.Wait() // the source delivered all it could, and waits
				if held := lines.Matching(producer.HeldPermitsLog); len(held) > 0 {
					t.Fatalf("warned before the source waited %v: %s", producer.HeldPermitsPatience, held[0])
				}
				time.Sleep(2 * producer.HeldPermitsPatience)
				synctest.Wait()
				held := lines.Matching(producer.HeldPermitsLog)
				if carry {
					if rec.Total() != total || len(held) > 0 {
						t.Fatalf("%d of %d messages handled, %d warnings (first: %s)", rec.Total(), total, len(held), first(held))
					}
				} else {
					// 100 taken, 33 delivered: 67 held, above the threshold.
					if rec.Total() != 33 || len(held) != 1 || !strings.Contains(held[0], "held=67") || !strings.Contains(held[0], "feed=partial") {
						t.Fatalf("%d messages handled, warnings %q; want 33 and one warning with held=67", rec.Total(), held)
					}
				}
				stop()
			})
		})
	}
}

// Guarantee: a source whose goroutines share one feed, each waiting in
// Acquire while another holds the permits it took through a fetch, and
// each delivering all it took, delivers everything and is not warned.
func TestSharedFeedFetchersAreNotWarnedOfHeldPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const total, fetchers = 1000, 2
		var lines logtest.Lines
		rec := acker.NewRecorder(false)
		src := &countingSource{run: func(ctx context.Context, st *producer.Stage[uint64], _ int) error {
			feed := st.NewFeed("shared", nil)
			var next atomic.Uint64
			var wg sync.WaitGroup
			for range fetchers {
				wg.Go(func() {
					for next.Load() < total {
						n, err := feed.Acquire(ctx, 100)
						if err != nil {
							return
						}
						time.Sleep(heldFetchTime) // the fetch, holding the permits
						msgs := make([]*message.Message[uint64], 0, n)
						for range n {
							if id := next.Add(1) - 1; id < total {
								msgs = append(msgs, message.New(id, rec, id))
							}
						}
						feed.Deliver(msgs...)
					}
				})
			}
			wg.Wait()
			<-ctx.Done()
			return nil
		}}
		stop := startHeldPermits(t, "shared", src, &lines)
		if err := rec.Wait(context.Background(), total); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * producer.HeldPermitsPatience)
		stop()
		if held := lines.Matching(producer.HeldPermitsLog); len(held) > 0 {
			t.Fatalf("a source whose fetchers deliver all they take was warned: %s", held[0])
		}
	})
}

// heldFetchTime is how long a fetch of TestSharedFeedFetchersAreNotWarnedOfHeldPermits takes.
const heldFetchTime = 10 * time.Millisecond

// Guarantee: the warning still comes when the source delivered something
// while it waited, then stopped delivering with permits held: here one
// goroutine takes every permit, delivers a few after a while and drops
// the rest, while another waits in Acquire.
func TestHeldPermitsAreWarnedOfAfterADeliveryWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines logtest.Lines
		rec := acker.NewRecorder(false)
		src := &countingSource{run: func(ctx context.Context, st *producer.Stage[uint64], _ int) error {
			feed := st.NewFeed("dropping", nil)
			n, err := feed.Acquire(ctx, 100) // every permit
			if err != nil {
				return nil
			}
			waiting := make(chan struct{})
			go func() {
				close(waiting)
				_, _ = feed.Acquire(ctx, 100) // waits: the other goroutine holds them all
			}()
			<-waiting
			time.Sleep(producer.HeldPermitsPatience / 2)
			msgs := make([]*message.Message[uint64], 0, n)
			for i := range uint64(10) {
				msgs = append(msgs, message.New(i, rec, i))
			}
			feed.Deliver(msgs...) // 10 of n; the rest are dropped
			<-ctx.Done()
			return nil
		}}
		stop := startHeldPermits(t, "dropping", src, &lines)
		time.Sleep(4 * producer.HeldPermitsPatience)
		held := lines.Matching(producer.HeldPermitsLog)
		stop()
		if len(held) != 1 || !strings.Contains(held[0], "held=90") {
			t.Fatalf("warnings %q, want one with held=90", held)
		}
	})
}

// startHeldPermits starts a pipeline named name on src, a pull source,
// with a window of 100 refilled by 50 at 50 and its log in lines, in the
// current synctest bubble. It returns a function that stops it, failing t
// if Stop fails; the test's cleanup stops it otherwise.
func startHeldPermits(t *testing.T, name string, src producer.Source[uint64], lines *logtest.Lines) (stop func()) {
	t.Helper()
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       name,
		Logger:     slog.New(slog.NewTextHandler(lines, nil)),
		Producer:   producer.Options[uint64]{Source: src, Flow: producer.Flow{Initial: 100, Threshold: 50, Refill: 50}},
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: identity},
	})
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = p.Stop(ctx)
		}
	})
	return func() {
		t.Helper()
		stopped = true
		if err := p.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
}
