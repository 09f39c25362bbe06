package source_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/batchtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
)

// onRelease returns the OnRelease the source's i-th subscribe passed to
// the backend, failing the test when it passed none.
func (b *heldBackend) onRelease(t *testing.T, i int) func() (done func()) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if i >= len(b.opts) || b.opts[i].OnRelease == nil {
		t.Fatalf("subscribe %d passed no OnRelease (%d subscribes)", i, len(b.opts))
	}
	return b.opts[i].OnRelease
}

// Guarantee: the OnRelease a source subscribes with reaches the feed of
// the Run receiving through the subscription: called while a message
// waits in an open batch, it has the batch emitted at once, not at
// BatchTimeout. Called while no Run receives (before the pipeline runs,
// after it stopped), it does nothing and returns a done that does
// nothing.
func TestOnReleaseEmitsTheOpenBatchesOfTheRunningPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, h := heldTopic(t, topic.Options{})
		b.releaseAll() // the subscriptions' Close returns at once
		src := newSource(t, h, topic.Balanced("g"))
		release := b.onRelease(t, 0)
		release()() // no Run yet

		batches := batchtest.New[int]()
		p := run(t, pipeline.Options[int, int]{
			Name:     "held",
			Producer: producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				return m.Data, nil
			}},
			Batchers: []batcher.Options[int]{batches.Batcher(100, time.Hour)},
		})
		b.sub(t, 0).in <- topic.Envelope[int]{ID: 1, Value: 1}
		synctest.Wait()
		batches.None(t, "before BatchTimeout")
		done := release()
		synctest.Wait()
		batches.Emitted(t, "OnRelease", 1)
		done()
		stop(t, p)
		release()() // the Run has returned
	})
}
