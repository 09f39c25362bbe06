package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a source that releases a feed and waits for its messages
// (Feed.FlushInFlight) has them handled and acknowledged at once, though
// they wait in an open batch whose BatchTimeout is an hour away: the
// pipeline's batchers emit their open batches with trigger flush.
func TestFeedFlushInFlightEmitsOpenBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		rec := acker.NewRecorder(false)
		feeds := make(chan *producer.Feed[uint64], 1)
		src := producer.SourceFunc[uint64](func(ctx context.Context, st *producer.Stage[uint64]) error {
			f := st.NewFeed("p0", nil)
			if _, err := f.Acquire(ctx, n); err != nil {
				return err
			}
			for i := range uint64(n) {
				f.Deliver(message.New(i, rec, i))
			}
			feeds <- f
			<-ctx.Done()
			return nil
		})
		var mu sync.Mutex
		var triggers []message.Trigger
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name:     "release-flush",
			Producer: producer.Options[uint64]{Source: src},
			Processors: processor.Options[uint64, uint64]{Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				return m.Data, nil
			}},
			Batchers: []batcher.Options[uint64]{{
				Name: message.DefaultBatcher, BatchSize: 100, BatchTimeout: time.Hour,
				Handle: func(_ context.Context, batch []*message.Message[uint64], info message.BatchInfo) error {
					mu.Lock()
					for range batch {
						triggers = append(triggers, info.Trigger)
					}
					mu.Unlock()
					return nil
				},
			}},
		})
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		f := <-feeds
		synctest.Wait()
		if got := len(rec.Counts()); got != 0 {
			t.Fatalf("%d messages acknowledged before the release; they should wait in the open batch", got)
		}
		start := time.Now()
		done := f.FlushInFlight()
		synctest.Wait()
		done()
		if got := len(rec.Counts()); got != n || time.Since(start) != 0 {
			t.Fatalf("%d of %d messages acknowledged %v after the release began, want all at once", got, n, time.Since(start))
		}
		mu.Lock()
		for _, tr := range triggers {
			if tr != message.TriggerFlush {
				t.Errorf("batch emitted with trigger %v, want flush", tr)
			}
		}
		mu.Unlock()
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		assertExactlyOnce(t, rec, n)
	})
}
