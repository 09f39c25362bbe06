package pipeline_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: reading the stats never waits on user code. While the
// processors' PartitionBy blocks, on the source's goroutine, inside a
// delivery that goes straight to the processors, Pipeline.Stats,
// Stage.Buffered and Stage.FeedStats return at once, reporting the
// delivery; once PartitionBy returns, the message is handled and the
// pipeline stops cleanly.
func TestStatsDoNotWaitForABlockedPartitionBy(t *testing.T) {
	rec := acker.NewRecorder(false)
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	var stage atomic.Pointer[producer.Stage[uint64]]
	src := producer.SourceFunc[uint64](func(ctx context.Context, st *producer.Stage[uint64]) error {
		stage.Store(st)
		feed := st.NewFeed("blocked", nil)
		if _, err := feed.Acquire(ctx, 1); err != nil {
			return nil
		}
		feed.Deliver(message.New(uint64(0), rec, uint64(0)))
		<-ctx.Done()
		return nil
	})
	var once sync.Once
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:     "statsblock",
		Producer: producer.Options[uint64]{Source: src},
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 2,
			Handle:      identity,
			PartitionBy: func(m *message.Message[uint64]) string {
				once.Do(func() {
					close(entered)
					<-release
				})
				return "k"
			},
		},
	})
	ctx := ctxT(t, 30*time.Second)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unblock()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("Stop = %v", err)
		}
	})
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("PartitionBy was never called")
	}

	type reading struct {
		st       pipeline.Stats
		buffered int
		feeds    []producer.NamedFeedStats
	}
	read := make(chan reading, 1)
	go func() {
		s := stage.Load()
		read <- reading{st: p.Stats(), buffered: s.Buffered(), feeds: s.FeedStats()}
	}()
	var got reading
	wait.Within(t, 5*time.Second, "Stats, Buffered and FeedStats while PartitionBy blocks", func() bool {
		select {
		case got = <-read:
			return true
		default:
			return false
		}
	})
	if n := len(got.st.Producers); n != 1 {
		t.Fatalf("Stats has %d producer stages, want 1", n)
	}
	if b := got.st.Producers[0].Buffered; b != 0 || got.buffered != 0 {
		t.Errorf("Buffered = %d (Stats %d), want 0: the message is on its way to the processors", got.buffered, b)
	}
	if len(got.feeds) != 1 || got.feeds[0].Name != "blocked" || got.feeds[0].Delivered != 1 {
		t.Errorf("FeedStats = %+v, want the one feed, 1 message delivered", got.feeds)
	}
	if f := got.st.Producers[0].Feeds; len(f) != 1 || f[0].Delivered != 1 {
		t.Errorf("Stats' feeds = %+v, want the one feed, 1 message delivered", f)
	}

	unblock()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := rec.Wait(wctx, 1); err != nil {
		t.Fatalf("the message got no outcome once PartitionBy returned: %v", err)
	}
	assertExactlyOnce(t, rec, 1)
}
