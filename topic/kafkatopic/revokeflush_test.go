package kafkatopic_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// tally counts how often each value was seen, safe for concurrent use.
type tally struct {
	mu   sync.Mutex
	seen map[int]int
}

func (c *tally) add(v int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[int]int{}
	}
	c.seen[v]++
}

// counts returns how many values were seen, and how many of them more
// than once.
func (c *tally) counts() (distinct, twice int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.seen {
		if k > 1 {
			twice++
		}
	}
	return len(c.seen), twice
}

// Guarantee: when a rebalance revokes a balanced member's partition, the
// messages of it that a pipeline reading the topic through topic/source
// holds in an open batch are batch-handled and committed before the
// member lets the partition go, however far BatchTimeout is above
// RevokeTimeout: the source's OnRelease has the batchers emit their open
// batches at once, so no settle is refused with ErrRevoked and the next
// owner of the partition does not receive them again.
func TestRevokeHasTheSourcesOpenBatchesHandledBeforeRelease(t *testing.T) {
	const n = 50
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.RevokeTimeout = 2 * time.Second
	b := newBackend(t, o)
	h := newTopic(t, b, "flush", topic.Options{})
	quiet := slog.New(slog.DiscardHandler)

	a, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var processed, batched tally
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "a",
		Logger:   quiet,
		Producer: producer.Options[int]{Source: a},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			processed.add(m.Data)
			return m.Data, nil
		}},
		Batchers: []batcher.Options[int]{{Name: message.DefaultBatcher, BatchSize: 10 * n, BatchTimeout: time.Hour, Concurrency: 1,
			Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
				for _, m := range batch {
					batched.add(m.Data)
				}
				return nil
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(ctxT(t)); err != nil {
			t.Errorf("stopping the pipeline: %v", err)
		}
	}()
	for v := range n {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
	// Every message waits in the batcher's open batch.
	wait.Within(t, patience, "the processors to handle every message", func() bool {
		got, _ := processed.counts()
		return got == n
	})
	if got, _ := batched.counts(); got != 0 {
		t.Fatalf("%d messages batch-handled before the rebalance; the batch should still be open", got)
	}

	// A second member joins: the rebalance (eager) revokes A's partition.
	// The join completes once A has let it go and committed what was
	// settled.
	second, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := second.Close(ctxT(t)); err != nil {
			t.Errorf("closing the second source: %v", err)
		}
	}()
	if got, _ := batched.counts(); got != n {
		t.Errorf("the partition was let go with %d of %d messages batch-handled", got, n)
	}
	gid := kafkatopic.GroupID("flush", "g")
	if got := committed(t, c, kafkatopic.KafkaTopic("flush"), gid); got[0] != n {
		t.Errorf("committed %v when the partition was let go, want %d on partition 0", got, n)
	}
	if st := a.Stats(); st.SettleFailed != 0 {
		t.Errorf("%d settles refused (the partition was revoked first)", st.SettleFailed)
	}
	if _, twice := batched.counts(); twice != 0 {
		t.Errorf("%d messages batch-handled twice", twice)
	}
}
