package pulsartopic_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
)

// entries groups the messages stored on topic full by the entry that
// holds them.
func entries(b *pulsartest.Broker, full string) map[[2]uint64][]pulsartest.Message {
	out := make(map[[2]uint64][]pulsartest.Message)
	for _, m := range b.Messages(full) {
		k := [2]uint64{m.ID.LedgerID, m.ID.EntryID}
		out[k] = append(out[k], m)
	}
	return out
}

// publishTogether publishes n values to h at once and waits for every
// receipt.
func publishTogether(t *testing.T, h *topic.Handle[int], n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := h.Publish(ctxT(t), i); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// Guarantee: without Options.Batching every publish is an entry of its
// own; with it, publishes made together share batch entries, and with
// Options.Key too each batch entry holds the messages of one key only (so
// that Key_Shared consumers can route it).
func TestBatchingGroupsConcurrentPublishesIntoEntries(t *testing.T) {
	const n = 40
	for _, c := range []struct {
		name           string
		batching, keys bool
	}{{"unbatched", false, false}, {"batched", true, false}, {"batched by key", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			b := testbroker.Pulsar(t)
			o := testOptions[int](b, topic.IntCodec{})
			o.Batching = c.batching
			o.BatchingMaxPublishDelay = 200 * time.Millisecond
			if c.keys {
				o.Key = func(v int) string { return fmt.Sprint(v % 2) }
			}
			be := newBackend(t, o)
			h := newHandle(t, be, "t", topic.Options{})
			publishTogether(t, h, n)
			es := entries(b, be.TopicName("t"))
			largest := 0
			for id, ms := range es {
				largest = max(largest, len(ms))
				for _, m := range ms[1:] {
					if m.Key != ms[0].Key {
						t.Errorf("entry %v holds keys %q and %q", id, ms[0].Key, m.Key)
						break
					}
				}
			}
			if c.batching && largest < 2 {
				t.Fatalf("%d publishes made together were stored in %d entries of one message each, want batches", n, len(es))
			}
			if !c.batching && largest > 1 {
				t.Fatalf("without batching an entry holds %d messages", largest)
			}
		})
	}
}
