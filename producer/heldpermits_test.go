package producer_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/producer"
)

// heldFlow leaves a source that takes the whole initial window holding
// more permits than the threshold until it delivers 15 of them.
var heldFlow = producer.Flow{Initial: 20, Threshold: 5, Refill: 5}

// holdWindow starts a stage whose source registers one pull feed, takes
// the feed's whole initial window and returns it; then, having delivered
// first of the permits, it waits in Acquire on a goroutine of its own
// until the feed closes (stop stops the stage and waits for it all).
func holdWindow(t *testing.T, out producer.Output[item], log *slog.Logger, first int) (f *producer.Feed[item], stop func()) {
	t.Helper()
	feeds := make(chan *producer.Feed[item], 1)
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		feeds <- st.NewFeed("f", nil)
		<-ctx.Done()
		return nil
	})
	h := start(t, "held", producer.Options[item]{Source: src, Flow: heldFlow}, out, log)
	f = <-feeds
	if n := f.TryAcquire(1 << 30); n != heldFlow.Initial {
		t.Fatalf("took %d permits, want the initial %d", n, heldFlow.Initial)
	}
	f.Deliver(feedItems("f", 0, first)...)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = f.Acquire(context.Background(), 1) })
	synctest.Wait() // it waits in Acquire
	return f, func() {
		h.p.StopFetching() // closes the feed: Acquire returns
		wg.Wait()
		waitDone(t, h)
	}
}

// Guarantee: a delivery while the source waits in Acquire holding permits
// restarts the wait before the held-permits warning: the warning comes
// only once the source has delivered nothing for HeldPermitsPatience.
func TestADeliveryPostponesTheHeldPermitsWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		f, stop := holdWindow(t, newRecorder(), log, 0)
		time.Sleep(producer.HeldPermitsPatience / 2)
		f.Deliver(feedItems("f", 0, 1)...) // another fetcher delivers one: 19 held
		time.Sleep(producer.HeldPermitsPatience/2 + time.Second)
		synctest.Wait()
		if n := countLines(lines(), producer.HeldPermitsLog); n != 0 {
			t.Fatalf("warned %d times %v after the wait began, though the feed delivered %v into it: %q",
				n, producer.HeldPermitsPatience+time.Second, producer.HeldPermitsPatience/2, lines())
		}
		time.Sleep(producer.HeldPermitsPatience)
		synctest.Wait()
		if n := countLines(lines(), producer.HeldPermitsLog, "held=19"); n != 1 {
			t.Fatalf("%d warnings with held=19 once the feed delivered nothing for %v, want 1: %q",
				n, producer.HeldPermitsPatience, lines())
		}
		stop()
	})
}

// Guarantee: a source that, by the end of its wait in Acquire, holds no
// more undelivered permits than the threshold is not warned, though it
// held more when the wait began.
func TestHoldingNoMoreThanTheThresholdIsNotWarnedOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, lines := newLogRecorder()
		rec := newRecorder()
		release, _ := rec.hold() // nothing leaves: no refill
		held := heldFlow.Threshold + 1
		f, stop := holdWindow(t, rec, log, heldFlow.Initial-held)
		time.Sleep(producer.HeldPermitsPatience / 2)
		f.Deliver(feedItems("f", 0, 1)...) // held: exactly the threshold
		time.Sleep(3 * producer.HeldPermitsPatience)
		synctest.Wait()
		if n := countLines(lines(), producer.HeldPermitsLog); n != 0 {
			t.Fatalf("warned %d times of a source holding %d permits, the threshold: %q", n, heldFlow.Threshold, lines())
		}
		release()
		stop()
	})
}
