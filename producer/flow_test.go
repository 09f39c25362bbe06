package producer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// flows are the permit windows the flow tests run with: the default, and
// windows where Initial, Threshold+Refill or neither is the larger.
var flows = []producer.Flow{
	{},
	{Initial: 10, Threshold: 3, Refill: 4},
	{Initial: 20, Threshold: 15, Refill: 10},
	{Initial: 8, Threshold: 1, Refill: 20},
}

func flowName(f producer.Flow) string {
	f = f.WithDefaults()
	return fmt.Sprintf("%d-%d-%d", f.Initial, f.Threshold, f.Refill)
}

// Guarantee: while the processors are randomly slow, a feed never has more than max(Initial, Threshold+Refill) permits outstanding; it is granted Initial first, then exactly Refill each time.
func TestFlowWindowBound(t *testing.T) {
	for _, flow := range flows {
		t.Run(flowName(flow), func(t *testing.T) {
			rec := newRecorder()
			rec.jitter = true
			src := &brokerSource{feedsPerStage: 2, perFeed: 400}
			src.watchWindows(rec)
			h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, rec, nil)
			waitDone(t, h)
			verifyFlow(t, src, rec, flow.WithDefaults(), 2)
		})
	}
}

// Guarantee: with several feeds per stage and several stages, each feed has its own window, bounded and refilled independently.
func TestFlowWindowPerFeedAcrossStages(t *testing.T) {
	for _, flow := range flows[:2] {
		t.Run(flowName(flow), func(t *testing.T) {
			rec := newRecorder()
			rec.jitter = true
			src := &brokerSource{feedsPerStage: 3, perFeed: 300}
			src.watchWindows(rec)
			h := start(t, "p", producer.Options[item]{Source: src, Flow: flow, Concurrency: 3}, rec, nil)
			waitDone(t, h)
			verifyFlow(t, src, rec, flow.WithDefaults(), 9)
		})
	}
}

// Guarantee: every delivered message is published to the Output exactly once, in delivery order per feed.
func TestEveryDeliveryPublishedOnceInOrder(t *testing.T) {
	rec := newRecorder()
	rec.jitter = true
	src := &brokerSource{feedsPerStage: 4, perFeed: 500}
	flow := producer.Flow{Initial: 8, Threshold: 1, Refill: 20}
	src.watchWindows(rec)
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow, Concurrency: 3}, rec, nil)
	waitDone(t, h)
	verifyFlow(t, src, rec, flow, 12)
	if got := rec.published(); got != 12*500 {
		t.Errorf("%d messages published, want %d", got, 12*500)
	}
}

// Guarantee: a permit is charged when the Output accepts the message, not when the source delivers it: while the processors are busy no refill comes, and each feed keeps its own full window.
func TestPermitsChargedOnDispatchNotDelivery(t *testing.T) {
	flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
	rec := newRecorder()
	release, blocked := rec.hold()
	src := &brokerSource{feedsPerStage: 3, perFeed: 30}
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow, Concurrency: 2}, rec, nil)

	wait.For(t, "every feed to use its Initial permits while the Output is busy", func() bool {
		fs := src.all()
		if len(fs) != 6 || blocked.Load() != 2 {
			return false
		}
		for _, f := range fs {
			if f.fetched.Load() != int64(flow.Initial) {
				return false
			}
		}
		return true
	})
	for _, f := range src.all() {
		if g := f.grantList(); !slices.Equal(g, []int{flow.Initial}) {
			t.Errorf("feed %s: grants %v before anything left the buffer, want only [%d]", f.name, g, flow.Initial)
		}
		want := producer.FeedStats{Remaining: flow.Initial, Granted: flow.Initial, Delivered: flow.Initial}
		if st := f.feed.Load().Stats(); st != want {
			t.Errorf("feed %s: Stats() = %+v, want %+v", f.name, st, want)
		}
	}
	if got := rec.published(); got != 0 {
		t.Fatalf("%d messages published while the Output was held", got)
	}

	release()
	waitDone(t, h)
	verifyFlow(t, src, rec, flow, 6)
}

// Guarantee: the feeds of a Run are closed when it returns: charging their messages afterwards grants them nothing, while the messages are still dispatched.
func TestNoGrantAfterRunReturned(t *testing.T) {
	flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
	rec := newRecorder()
	release, _ := rec.hold()

	var mu sync.Mutex
	grants := map[string][]int{}
	record := func(feed string) func(int) {
		return func(n int) {
			mu.Lock()
			grants[feed] = append(grants[feed], n)
			mu.Unlock()
		}
	}
	var calls atomic.Int32
	firstReturning := make(chan struct{})
	secondRun := make(chan struct{})
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		if calls.Add(1) == 1 {
			f := st.NewFeed("run1", record("run1"))
			for i := range flow.Initial {
				f.Deliver(message.New(item{Feed: "run1", Seq: i}, nil, 0))
			}
			close(firstReturning)
			return errors.New("connection lost") // restarted after the backoff
		}
		close(secondRun)
		st.NewFeed("run2", record("run2"))
		<-ctx.Done()
		return ctx.Err()
	})
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow, Restart: producer.Restart{Backoff: time.Millisecond, Window: time.Hour}}, rec, nil)

	<-firstReturning
	// The restart waits until the failed run's messages have left the
	// buffer, so the restarted consumers' windows do not stack on them.
	time.Sleep(20 * time.Millisecond)
	if isClosed(secondRun) {
		t.Fatal("the source was restarted while the failed run's messages were still buffered")
	}
	release() // now the first Run's messages leave the buffer and are charged
	select {
	case <-secondRun:
	case <-time.After(deadline):
		t.Fatal("the failed source was not restarted")
	}
	wait.For(t, "the first Run's messages to be published", func() bool { return rec.count("run1") == flow.Initial })
	h.p.StopFetching()
	waitDone(t, h)

	mu.Lock()
	defer mu.Unlock()
	if g := grants["run1"]; !slices.Equal(g, []int{flow.Initial}) {
		t.Errorf("feed of the returned Run got grants %v, want only its Initial [%d]", g, flow.Initial)
	}
	if g := grants["run2"]; !slices.Equal(g, []int{flow.Initial}) {
		t.Errorf("feed of the restarted Run got grants %v, want a fresh Initial [%d]", g, flow.Initial)
	}
	if got := rec.seqs("run1"); !slices.Equal(got, seqRange(flow.Initial)) {
		t.Errorf("published %v from the failed Run, want its %d deliveries in order", got, flow.Initial)
	}
}

// Guarantee: Feed.Close stops a feed's grants while its delivered messages are still dispatched and other feeds go on being refilled.
func TestFeedCloseStopsGrants(t *testing.T) {
	flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
	rec := newRecorder()
	release, blocked := rec.hold()

	var mu sync.Mutex
	grants := map[string][]int{}
	refilled := make(chan struct{}, 1)
	record := func(feed string) func(int) {
		return func(n int) {
			mu.Lock()
			grants[feed] = append(grants[feed], n)
			if len(grants[feed]) == 2 {
				refilled <- struct{}{}
			}
			mu.Unlock()
		}
	}
	delivered := make(chan struct{})
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		a := st.NewFeed("a", record("a"))
		b := st.NewFeed("b", record("b"))
		for i := range flow.Initial {
			a.Deliver(message.New(item{Feed: "a", Seq: i}, nil, 0))
			b.Deliver(message.New(item{Feed: "b", Seq: i}, nil, 0))
		}
		a.Close()
		close(delivered)
		select { // b stays open until it is refilled
		case <-refilled:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, rec, nil)
	<-delivered
	wait.For(t, "the Output to be busy", func() bool { return blocked.Load() == 1 })
	release()
	waitDone(t, h)

	mu.Lock()
	defer mu.Unlock()
	if g := grants["a"]; !slices.Equal(g, []int{flow.Initial}) {
		t.Errorf("closed feed got grants %v, want only [%d]", g, flow.Initial)
	}
	if g := grants["b"]; len(g) < 2 || g[1] != flow.Refill {
		t.Errorf("open feed got grants %v, want a refill of %d", g, flow.Refill)
	}
	for _, f := range []string{"a", "b"} {
		if got := rec.seqs(f); !slices.Equal(got, seqRange(flow.Initial)) {
			t.Errorf("feed %s: published %v, want its %d deliveries in order", f, got, flow.Initial)
		}
	}
}

// Guarantee: a panicking grant callback is recovered and logged; the feed keeps being granted and the producer keeps running.
func TestPanickingGrantIsRecovered(t *testing.T) {
	flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
	log, logs := newLogRecorder()
	rec := newRecorder()
	src := &brokerSource{feedsPerStage: 1, perFeed: 50, panicInGrant: true}
	h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, rec, log)
	waitDone(t, h)
	verifyFlow(t, src, rec, flow, 1)

	panics := countLines(logs(), "feed grant callback panicked", "feed=s0/f0", "grant callback exploded")
	if want := len(src.all()[0].grantList()); panics != want {
		t.Errorf("%d panics logged, want one per grant (%d)", panics, want)
	}
}
