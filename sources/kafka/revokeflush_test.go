package kafka_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a revoked partition's messages waiting in an open batch are
// handled and committed before the partition is released, however far
// BatchTimeout is above RevokeTimeout: the batchers emit their open
// batches at once, so no "still in flight" release is logged and the next
// owner does not handle those messages again.
func TestRevokeEmitsOpenBatchesBeforeRelease(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const n = 100
		group := "g-flush-" + cl.name
		c := newCluster(t, 1, kfake.SeedTopics(1, "other"))
		ends := produce(t, c, 1, 0, n)
		logs := logCapture{mu: &sync.Mutex{}, msgs: &[]string{}}
		opts := sourceOptions(c, group)
		opts.RevokeTimeout = 2 * time.Second
		opts.Logger = slog.New(logs)
		processed, batched := newLedger(), newLedger()
		po := pipelineOpts("a", cl.new(t, opts), 1, processed, nil)
		po.Batchers = []batcher.Options[[]byte]{{
			Name: message.DefaultBatcher, BatchSize: 10 * n, BatchTimeout: time.Hour, Concurrency: 1,
			Handle: func(_ context.Context, batch []*message.Message[[]byte], _ message.BatchInfo) error {
				for _, m := range batch {
					md, _ := message.MetadataAs[*kafka.Metadata](m)
					batched.add(md)
				}
				return nil
			},
		}}
		a := startPipeline(t, po)
		// Every record waits in the batcher's open batch.
		wait.Within(t, 10*time.Second, "A's processors to handle every record", func() bool { return processed.covers(ends) })
		if batched.handled(rec{0, 0}) {
			t.Fatal("a record was batched before the rebalance; the batch should still be open")
		}
		// B joins the group: A revokes its partition (range is eager) and
		// claims it again.
		bo := sourceOptions(c, group)
		bo.Topics = []string{"other"}
		b := startPipeline(t, pipelineOpts("b", cl.new(t, bo), 1, newLedger(), nil))
		wait.Within(t, 20*time.Second, "A's partition to be released", func() bool { return logs.has("kafka partition released") })
		if logs.has("kafka partition released with messages still in flight; they will be delivered again") {
			t.Error("the partition was released with its batched messages still in flight")
		}
		if !batched.covers(ends) {
			t.Errorf("the revoke released the partition before the open batch was handled (handled %v of %v)",
				batched.handledPrefix(1), ends)
		}
		// The final commit of the released claim precedes its log line.
		if got := committed(c, group); !equalOffsets(got, ends) {
			t.Errorf("committed %v when the partition was released, want %v", got, ends)
		}
		stopPipeline(t, b)
		stopPipeline(t, a)
		if d := batched.duplicates(); d != 0 {
			t.Fatalf("%d records handled twice by the batch handler", d)
		}
	})
}
