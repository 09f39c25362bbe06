package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// Guarantee: a member whose Close starts with its context already ended
// (Stop called with a cancelled context, or past its deadline) still
// leaves the group before Close returns, with either client: the group
// hands its partitions to the members still working at once, not after
// the member's session timeout (30s here, so that the broker evicting
// the member cannot stand in for its leave).
func TestCloseWithAnEndedContextLeavesTheGroup(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 4
		group := "g-ended-leave"
		c := newCluster(t, parts)
		opts := sourceOptions(c, group)
		opts.Config.Consumer.Group.Session.Timeout = 30 * time.Second
		p := startPipeline(t, pipelineOpts("ended", cl.new(t, opts), 2, newLedger(), nil))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
			return gi != nil && len(gi.Members) == 2 && gi.NumAssigned() == parts &&
				gi.Members[0].NumAssigned() > 0 && gi.Members[1].NumAssigned() > 0
		}); err != nil {
			t.Fatalf("the members did not share the partitions: %v", err)
		}
		if left := stopEndedAndList(t, p, c, group, ""); len(left) > 0 {
			t.Fatalf("members %v are still in the group after Close returned", left)
		}
	})
}

// stopEndedAndList stops p with a context already ended, waits until it
// has stopped (its source's Close returned), and returns the members of
// group left in c but for except.
func stopEndedAndList(t *testing.T, p *pipeline.Pipeline[[]byte, []byte], c *kfake.Cluster, group, except string) []string {
	t.Helper()
	ended, end := context.WithCancel(context.Background())
	end()
	_ = p.Stop(ended) // cut short: reports ErrShutdownTimeout or nothing
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the pipeline did not stop")
	}
	var left []string
	if gi := c.GroupInfo(group); gi != nil {
		for _, m := range gi.Members {
			if m.MemberID != except {
				left = append(left, m.MemberID)
			}
		}
	}
	return left
}

// Guarantee: a franz-go member the group forgot (a heartbeat answered
// UNKNOWN_MEMBER_ID), joining again under a new member id while the
// rebalance waits for the others, still leaves the group when its Close
// starts with an ended context: the group does not keep the new member
// waiting in its join, to be given partitions nobody reads at the
// rebalance's end. The member the heartbeat's answer made up stays (the
// group never forgot it): it is the only one left.
func TestCloseWithAnEndedContextLeavesTheGroupMidRejoin(t *testing.T) {
	const parts = 2
	group := "g-ended-rejoin"
	c := newCluster(t, parts)
	opts := sourceOptions(c, group)
	// Neither the old member's session nor the rebalance ends during the
	// test: the new member waits in its join until it leaves.
	opts.Config.Consumer.Group.Session.Timeout = 30 * time.Second
	opts.Config.Consumer.Group.Rebalance.Timeout = time.Minute
	p := startPipeline(t, pipelineOpts("rejoin", franzClient.new(t, opts), 1, newLedger(), nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gi, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
		return gi != nil && len(gi.Members) == 1 && gi.NumAssigned() == parts
	})
	if err != nil {
		t.Fatalf("the member did not claim the partitions: %v", err)
	}
	forgotten := gi.Members[0].MemberID
	// The member's next heartbeat, then its join under its old id, are
	// answered as the group would answer a member it removed: it joins
	// again without an id, and is given a new one.
	forgetOnce(c, kmsg.Heartbeat, forgotten)
	forgetOnce(c, kmsg.JoinGroup, forgotten)
	if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
		return gi != nil && len(gi.Members) == 2 && gi.State == "PreparingRebalance"
	}); err != nil {
		t.Fatalf("the member did not join again: %v", err)
	}
	if left := stopEndedAndList(t, p, c, group, forgotten); len(left) > 0 {
		t.Fatalf("members %v are still in the group after Close returned", left)
	}
}

// forgetOnce answers the first request of key (Heartbeat or JoinGroup)
// from memberID as a group answers a member it removed:
// UNKNOWN_MEMBER_ID.
func forgetOnce(c *kfake.Cluster, key kmsg.Key, memberID string) {
	var done atomic.Bool
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind()
		switch r := req.(type) {
		case *kmsg.HeartbeatRequest:
			if r.MemberID != memberID {
				return nil, nil, false
			}
			resp.(*kmsg.HeartbeatResponse).ErrorCode = kerr.UnknownMemberID.Code
		case *kmsg.JoinGroupRequest:
			if r.MemberID != memberID {
				return nil, nil, false
			}
			resp.(*kmsg.JoinGroupResponse).ErrorCode = kerr.UnknownMemberID.Code
		default:
			return nil, nil, false
		}
		if !done.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		return resp, nil, true
	})
}
