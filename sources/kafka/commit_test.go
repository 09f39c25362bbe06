package kafka_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// countCommits counts the OffsetCommit requests of group at the broker.
func countCommits(c *kfake.Cluster, group string) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.OffsetCommitRequest).Group == group {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// Guarantee: commits are batched on the commit interval, never one per
// acknowledged message.
func TestCommitsAreBatched(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		group := "g-batched"
		c := newCluster(t, parts)
		n := 600
		ends := produce(t, c, parts, 0, n)
		commits := countCommits(c, group)
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.CommitInterval = 500 * time.Millisecond
		po := pipelineOpts("batched", cl.new(t, opts), 1, l, func(*message.Message[[]byte]) error {
			time.Sleep(200 * time.Microsecond)
			return nil
		})
		po.Processors.MaxDemand = 1 // one ack per message
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "every record", func() bool { return l.covers(ends) })
		wait.Within(t, 10*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, p)
		if got := commits.Load(); got > int64(n/10) {
			t.Fatalf("%d OffsetCommit requests for %d records acknowledged one by one: commits are not batched", got, n)
		}
	})
}

// Guarantee: a partition commits what was handled as soon as it is
// released, without waiting for the commit interval or for the other
// partitions of the session to finish their in-flight messages.
func TestReleasedPartitionCommitsAtOnce(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		group := "g-release"
		c := newCluster(t, parts, kfake.SeedTopics(1, "other"))
		ends := produce(t, c, parts, 0, 100)
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.CommitInterval = time.Hour // no interval commit during the test
		opts.Config.Consumer.Group.Rebalance.Timeout = 20 * time.Second
		opts.RevokeTimeout = 15 * time.Second
		opts.Unordered = true
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock()
		po := pipelineOpts("a", cl.new(t, opts), 1, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Partition == 0 && md.Offset == 5 && md.GenerationID == 1 {
				<-release // partition 0 keeps the session's revoke waiting
			}
			return nil
		})
		po.Processors.Concurrency = 4
		po.Processors.MaxDemand = 1
		a := startPipeline(t, po)
		wait.Within(t, 10*time.Second, "partition 1 handled", func() bool { return l.covers(map[int32]int64{1: ends[1]}) })
		if got := committed(c, group); len(got) != 0 {
			t.Fatalf("committed %v before any release with an hour-long interval", got)
		}
		// B joins on another topic: the eager rebalance revokes both partitions
		// of A; partition 0 waits for its stuck message, partition 1 is done.
		bo := sourceOptions(c, group)
		bo.Topics = []string{"other"}
		b := startPipeline(t, pipelineOpts("b", cl.new(t, bo), 1, newLedger(), nil))
		wait.Within(t, 8*time.Second, "partition 1 committed at its end while partition 0 still waits", func() bool {
			return committed(c, group)[1] == ends[1]
		})
		if got := committed(c, group)[0]; got > 5 {
			t.Fatalf("partition 0 committed %d past its unhandled offset 5", got)
		}
		unblock()
		stopPipeline(t, b)
		stopPipeline(t, a)
	})
}
