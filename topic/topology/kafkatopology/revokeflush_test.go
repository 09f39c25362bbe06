package kafkatopology

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
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: when a rebalance takes a reader's partition away, the
// letters of it that a pipeline reading the topology through its Source
// holds in an open batch are batch-handled and committed before the
// reader lets the partition go, however far BatchTimeout is above
// RevokeTimeout: the Source has the batchers emit their open batches at
// once (topology.ReleaseNotifier), so no settle is refused with
// ErrRevoked and the next owner does not deliver those letters again.
func TestRevokeHasTheSourcesOpenBatchesHandledBeforeRelease(t *testing.T) {
	const n = 50
	kafka := testbroker.Kafka(t)
	b := newBackend(t, kafka.ListenAddrs()) // RevokeTimeout 2s
	q := declare(t, b, topology.New("flush"))
	src, err := topology.NewSource(topology.SourceOptions[msg]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	processed, batched := map[int]int{}, map[int]int{}
	seen := func(m map[int]int) int {
		mu.Lock()
		defer mu.Unlock()
		return len(m)
	}
	p, err := pipeline.New(pipeline.Options[msg, msg]{
		Name:     "a",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[msg]{Source: src},
		Processors: processor.Options[msg, msg]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[msg]) (msg, error) {
			mu.Lock()
			processed[m.Data.N]++
			mu.Unlock()
			return m.Data, nil
		}},
		Batchers: []batcher.Options[msg]{{Name: message.DefaultBatcher, BatchSize: 10 * n, BatchTimeout: time.Hour, Concurrency: 1,
			Handle: func(_ context.Context, batch []*message.Message[msg], _ message.BatchInfo) error {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range batch {
					batched[m.Data.N]++
				}
				return nil
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		topologytest.MustClose(t, "the pipeline", p.Stop)
	}()
	for i := range n {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: i}}); err != nil {
			t.Fatal(err)
		}
	}
	// Every letter waits in the batcher's open batch.
	wait.Within(t, 30*time.Second, "the processors to handle every letter", func() bool { return seen(processed) == n })
	if got := seen(batched); got != 0 {
		t.Fatalf("%d letters batch-handled before the rebalance; the batch should still be open", got)
	}

	// A second reader joins: the rebalance (eager) takes the partition
	// away from the pipeline's reader. TryReceive returns once the second
	// reader is in its session, the rebalance over, and has fetched what
	// it was given up to the log end.
	second := subscribe(t, q)
	buf := make([]topology.Letter[msg], n)
	again, err := second.TryReceive(t.Context(), buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(batched); got != n {
		t.Errorf("the partition was let go with %d of %d letters batch-handled", got, n)
	}
	if again != 0 {
		t.Errorf("the partition's next owner received %d letters again, the first %d", again, buf[0].Value.N)
	}
	qs := q.(*queues[msg])
	if got := committedOffset(t, kafka.ListenAddrs(), qs.main, qs.groupID(), 0); got != n {
		t.Errorf("committed %d when the partition was let go, want %d", got, n)
	}
	if st := src.Stats(); st.SettleFailed != 0 {
		t.Errorf("%d settles refused (the partition was revoked first)", st.SettleFailed)
	}
}
