package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// stageSpy is a Kafka source that keeps the producer stage it runs in, to
// observe its buffer.
type stageSpy struct {
	testSource
	mu    sync.Mutex
	stage *producer.Stage[[]byte]
}

func (s *stageSpy) Run(ctx context.Context, stage *producer.Stage[[]byte]) error {
	s.mu.Lock()
	s.stage = stage
	s.mu.Unlock()
	return s.testSource.Run(ctx, stage)
}

// buffered is how many delivered messages wait in the stage buffer.
func (s *stageSpy) buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage == nil {
		return 0
	}
	return s.stage.Buffered()
}

// Guarantee: when a partition is revoked, the records it had delivered but
// that still waited in the producer stage buffer are withdrawn: the old
// owner never handles them after the revoke (only what had already left the
// stage buffer: the processor's queue, the message in the handler and the
// chunk being handed over), and the new owners handle them, so nothing is
// lost and nothing is committed unhandled.
func TestRevokeWithdrawsBufferedRecords(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const (
			parts   = 2
			perPart = 400
			window  = 300
		)
		group := "g-withdraw"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, parts*perPart)

		var mu sync.Mutex
		fetched := watchFetches(c) // highest fetch offset asked for, per partition

		l := newLedger()
		watch := watchCommits(c, group, l)
		opts := sourceOptions(c, group)
		opts.RevokeTimeout = time.Second

		// A: one member, one processor stuck in its first message until
		// release; it records the generation of every record it handles.
		release := make(chan struct{})
		stuck := make(chan struct{})
		var stuckOnce sync.Once
		firstGen := int32(-1)
		byGen := map[int32]int{}
		poA := pipelineOpts("a", cl.new(t, opts), 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			if firstGen < 0 {
				firstGen = md.GenerationID
			}
			byGen[md.GenerationID]++
			mu.Unlock()
			stuckOnce.Do(func() { close(stuck) })
			<-release
			return nil
		})
		poA.Producer.Flow = producer.Flow{Initial: window}
		poA.Processors.Concurrency = 1
		poA.Processors.MaxDemand = 1
		spyA := &stageSpy{testSource: poA.Producer.Source.(testSource)}
		poA.Producer.Source = spyA
		a := startPipeline(t, poA)
		// What can have left A's stage buffer when the revoke comes: the
		// message in its only handler, its queue (one window: less than the two
		// windows A fetches) and one dispatch chunk (64) blocked on that queue.
		dispatched := 1 + a.Topology().Processors.QueueCapacity + 64
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock()

		<-stuck
		// A delivers a whole window per partition at once: wait until it has
		// fetched that far and delivered it (what did not leave its stage
		// buffer waits there).
		wait.Within(t, 10*time.Second, "A to fetch a window of each partition", func() bool {
			f := fetched()
			return len(f) == parts && f[0] >= window && f[1] >= window
		})
		wait.Within(t, 10*time.Second, "A to deliver a window of each partition", func() bool {
			return spyA.buffered() >= max(1, parts*window-dispatched)
		})

		// B joins: the rebalance revokes both partitions from A.
		b := startPipeline(t, pipelineOpts("b", cl.new(t, opts), 1, l, nil))
		waitBothAssigned(t, c, group)
		unblock()
		wait.Within(t, 30*time.Second, "every record to be handled", func() bool { return l.covers(ends) })
		wait.Within(t, 10*time.Second, "the commits to reach the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, b)
		stopPipeline(t, a)
		watch.check(t)

		mu.Lock()
		defer mu.Unlock()
		old := byGen[firstGen]
		t.Logf("A handled %d records of its first generation (%d delivered per partition), %v by generation; %d duplicates overall",
			old, window, byGen, l.duplicates())
		if old > dispatched {
			t.Fatalf("A handled %d records of the revoked claims; at most %d had left its stage buffer: the rest should have been withdrawn", old, dispatched)
		}
	})
}
