package producer_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: readings of a feed's counters taken while its source delivers
// and withdraws never show more messages dispatched and withdrawn than
// delivered, and no counter goes down. The readings run on the one
// processor the test leaves the runtime, so that the scheduler's
// preemption, which may stop a reading at any point, lets the source
// deliver and withdraw in the middle of one.
func TestFeedStatsNeverShowMoreMessagesOutThanDelivered(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds = 100000
	var lines []string
	out := &gatedPrinter{entered: make(chan struct{}), release: make(chan struct{}), log: &lines}
	ready := make(chan *producer.Feed[string])
	src := producer.SourceFunc[string](func(ctx context.Context, stage *producer.Stage[string]) error {
		feed := stage.NewFeed("partition-0", nil)
		if _, err := feed.Acquire(ctx, 2); err != nil {
			return err
		}
		feed.Deliver(message.New("held", nil, 0))
		<-out.entered // the processors hold it: what follows stays buffered
		ready <- feed
		for range rounds {
			// The withdrawn message's permit is unused: deliver again.
			feed.Deliver(message.New("taken back", nil, 1))
			feed.Withdraw()
		}
		close(out.release)
		return nil
	})
	p := producer.New(producer.Options[string]{Source: src, Flow: producer.Flow{Initial: 2}}.WithDefaults(),
		producer.Config[string]{Name: "stats", Output: out})
	var wg sync.WaitGroup
	p.Start(context.Background(), &wg, func(err error) { t.Errorf("gave up: %v", err) })
	defer wg.Wait()
	feed := <-ready
	var last producer.FeedStats
	for last.Withdrawn < rounds {
		st := feed.Stats()
		if st.Dispatched+st.Withdrawn > st.Delivered {
			t.Fatalf("stats %+v show %d messages dispatched and %d withdrawn of %d delivered", st, st.Dispatched, st.Withdrawn, st.Delivered)
		}
		if st.Delivered < last.Delivered || st.Dispatched < last.Dispatched || st.Withdrawn < last.Withdrawn || st.Granted < last.Granted {
			t.Fatalf("counters went down: %+v after %+v", st, last)
		}
		last = st
	}
	<-p.Done()
}
