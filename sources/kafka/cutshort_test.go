package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: when a stop's drain is cut short (here a batch handler still
// busy when ShutdownTimeout passes, and batches waiting behind it), the
// source's Close does not wait again for the messages the pipeline left
// unhandled: each partition is released at once, with an INFO line (not a
// WARN) counting them, and the final commit of what was handled goes out,
// although the partitions' RevokeTimeout is longer than the time Close is
// given.
func TestACutShortDrainReleasesPartitionsAtOnceAndCommitsWhatWasHandled(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts, handled = 2, 6
		c := newCluster(t, parts)
		// Partition 0 first: partition 1's records come once partition
		// 0's blocked the handler.
		produceTo(t, c, 0, 20)
		var lines logtest.Lines
		opts := sourceOptions(c, "g-cut")
		opts.CommitInterval = time.Hour // only the final commit
		opts.RevokeTimeout = 3 * time.Second
		opts.Logger = slog.New(slog.NewTextHandler(&lines, nil))
		src := cl.new(t, opts)
		po := pipelineOpts("cut", src, 1, newLedger(), nil)
		po.Logger = opts.Logger
		po.ShutdownTimeout = time.Second
		po.Producer.Flow = producer.Flow{Initial: 10}
		po.Processors.Concurrency = 1
		// One message a batch, one batch at a time: the first ones are
		// handled; then the next keeps the handler busy until the drain is
		// cut short (it fails, and partition 0 is fetched again from it),
		// and the batches behind it, partition 1's among them, have no
		// outcome.
		batched := newLedger() // the records whose batch was handled
		batches := 0
		busy := make(chan struct{})
		po.Batchers = []batcher.Options[[]byte]{{
			Name: message.DefaultBatcher, BatchSize: 1, Concurrency: 1,
			Handle: func(ctx context.Context, batch []*message.Message[[]byte], _ message.BatchInfo) error {
				md, _ := message.MetadataAs[*kafka.Metadata](batch[0])
				if batches++; batches > handled {
					close(busy)
					<-ctx.Done()
					return ctx.Err()
				}
				batched.add(md)
				return nil
			},
		}}
		p := startPipeline(t, po)
		<-busy
		produceTo(t, c, 1, 5)
		wait.Within(t, 10*time.Second, "partition 1's records in flight", func() bool {
			for _, mb := range src.Stats().Members {
				for _, ps := range mb.Partitions {
					if ps.Partition == 1 && ps.InFlight == 5 {
						return true
					}
				}
			}
			return false
		}, func() string { return fmt.Sprintf("%+v", src.Stats().Members) })
		start := time.Now()
		if err := p.Stop(context.Background()); !errors.Is(err, pipeline.ErrShutdownTimeout) {
			t.Fatalf("Stop = %v, want ErrShutdownTimeout", err)
		}
		t.Logf("Stop took %v", time.Since(start))
		want := batched.handledPrefix(parts)
		wait.Within(t, 10*time.Second, fmt.Sprint("the handled prefixes ", want, " committed"), func() bool {
			got := committed(c, "g-cut")
			for part, n := range want {
				if got[part] < n {
					return false
				}
			}
			return true
		}, func() string { return fmt.Sprint("committed: ", committed(c, "g-cut")) })
		lines.Want(t, 0, "WARN lines of partitions released with messages in flight", "still in flight")
		if lines.Count(kafkaAbandonedLog, "level=INFO") == 0 {
			t.Errorf("no INFO line of a partition released with the messages the drain left:\n%v", lines.All())
		}
	})
}

// kafkaAbandonedLog begins the line of a partition released with
// messages a cut-short drain left unhandled.
const kafkaAbandonedLog = "kafka partition released with messages the pipeline's cut-short drain left unhandled"

// produceTo writes n records to partition part of the test topic.
func produceTo(t *testing.T, c *kfake.Cluster, part int32, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: testTopic, Partition: part, Value: fmt.Appendf(nil, "p%d-%d", part, i)}
	}
	produceSync(t, c, recs)
}
