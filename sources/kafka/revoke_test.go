package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a revoked partition waits (within RevokeTimeout) only for the
// messages that had left the stage buffer (the withdrawn ones are
// forgotten), commits them, and so the next owner does not handle them
// again: no duplicates and no "still in flight" release when the handler
// finishes in time.
func TestRevokeWaitsForInFlight(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		group := "g-wait"
		c := newCluster(t, 1, kfake.SeedTopics(1, "other"))
		ends := produce(t, c, 1, 0, 200)
		var joins atomic.Int64
		rebalancing := make(chan struct{})
		var rebOnce sync.Once
		c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if req.(*kmsg.JoinGroupRequest).Group == group && joins.Add(1) >= 3 {
				// A's first join is two requests (member id, then join), B's
				// first one starts the rebalance.
				rebOnce.Do(func() { close(rebalancing) })
			}
			return nil, nil, false
		})
		l := newLedger()
		logs := logCapture{mu: &sync.Mutex{}, msgs: &[]string{}}
		opts := sourceOptions(c, group)
		opts.RevokeTimeout = 3 * time.Second
		opts.Logger = slog.New(logs)
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock()
		po := pipelineOpts("a", cl.new(t, opts), 1, l, func(m *message.Message[[]byte]) error {
			if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset == 5 && md.GenerationID == 1 {
				<-release
			}
			return nil
		})
		po.Processors.Concurrency = 1
		po.Producer.Flow = producer.Flow{Initial: 300} // more than the processor holds: the rest is withdrawn
		a := startPipeline(t, po)
		wait.Within(t, 10*time.Second, "A to handle the first records", func() bool { return l.handled(rec{0, 4}) })
		bo := sourceOptions(c, group)
		bo.Topics = []string{"other"}
		b := startPipeline(t, pipelineOpts("b", cl.new(t, bo), 1, newLedger(), nil))
		select {
		case <-rebalancing:
		case <-time.After(10 * time.Second):
			t.Fatal("B never joined the group")
		}
		// A notices the rebalance and its claim waits for the stuck message.
		wait.Within(t, 10*time.Second, "A's partition to be releasing", func() bool { return logs.has("kafka partition releasing") })
		unblock()
		wait.Within(t, 20*time.Second, "every record", func() bool { return l.covers(ends) })
		wait.Within(t, 10*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, b)
		stopPipeline(t, a)
		if d := l.duplicates(); d != 0 {
			t.Fatalf("%d records handled twice: the revoke did not wait for the in-flight messages", d)
		}
		if logs.has("kafka partition released with messages still in flight; they will be delivered again") {
			t.Fatal("the revoke waited out RevokeTimeout: withdrawn messages were still counted as in flight")
		}
	})
}

// rawMember is a plain sarama group member that claims partitions and
// handles nothing (it marks no offset).
type rawMember struct {
	mu      sync.Mutex
	claimed map[int32]bool
}

func (r *rawMember) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (r *rawMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (r *rawMember) ConsumeClaim(_ sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	r.mu.Lock()
	r.claimed[claim.Partition()] = true
	r.mu.Unlock()
	for range claim.Messages() {
	}
	return nil
}

func (r *rawMember) partitions() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []int32
	for p := range r.claimed {
		ps = append(ps, p)
	}
	return ps
}

// Guarantee: under cooperative-sticky, a partition revoked with a message
// still in flight and later assigned back to the same member (same session,
// new claim) is never moved by the late ack of the old claim: every commit
// of the new claim covers only offsets the new claim handled.
func TestStaleClaimAckCooperative(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 2
		group := "g-coop-stale"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 2*100)

		var mu sync.Mutex
		firstGen := int32(-1)
		moved := int32(-1)               // the partition that went to the raw member and came back
		handledLater := map[int64]bool{} // offsets of moved handled after it came back
		var violations []string
		c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			r := req.(*kmsg.OffsetCommitRequest)
			if r.Group != group {
				return nil, nil, false
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tp := range r.Topics {
				for _, pp := range tp.Partitions {
					if pp.Partition != moved || pp.Offset <= 5 {
						continue
					}
					for o := int64(5); o < pp.Offset; o++ {
						if !handledLater[o] {
							violations = append(violations, fmt.Sprintf("partition %d committed %d but the new claim did not handle %d", pp.Partition, pp.Offset, o))
							break
						}
					}
				}
			}
			return nil, nil, false
		})

		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock()
		back := make(chan struct{})
		var backOnce sync.Once
		l := newLedger()
		opts := sourceOptions(c, group)
		opts.Rebalance = kafka.RebalanceCooperativeSticky
		opts.Unordered = true
		opts.RevokeTimeout = 300 * time.Millisecond
		logs := logCapture{mu: &sync.Mutex{}, msgs: &[]string{}}
		opts.Logger = slog.New(logs)
		po := pipelineOpts("a", cl.new(t, opts), 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			mu.Lock()
			if firstGen < 0 {
				firstGen = md.GenerationID
			}
			first := md.GenerationID == firstGen
			isMoved := md.Partition == moved
			mu.Unlock()
			if first {
				if md.Offset == 5 {
					<-release // stuck in the first claim, acknowledged late
				}
				return nil
			}
			if isMoved {
				backOnce.Do(func() { close(back) })
				time.Sleep(30 * time.Millisecond) // the new claim goes slowly
				mu.Lock()
				handledLater[md.Offset] = true
				mu.Unlock()
			}
			return nil
		})
		po.Processors.Concurrency = 4
		po.Processors.MaxDemand = 1
		a := startPipeline(t, po)
		wait.Within(t, 10*time.Second, "A to handle all but offset 5", func() bool {
			return l.handled(rec{0, 99}) && l.handled(rec{1, 99})
		})

		// A raw member joins: one partition moves to it, with offset 5 stuck in
		// A's old claim; then it leaves and the partition comes back to A.
		cfg := testConfig()
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		raw, err := sarama.NewConsumerGroup(c.ListenAddrs(), group, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rm := &rawMember{claimed: map[int32]bool{}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				if err := raw.Consume(ctx, []string{testTopic}, rm); err != nil {
					return
				}
			}
		}()
		wait.Within(t, 20*time.Second, "a partition moving to the raw member", func() bool { return len(rm.partitions()) > 0 })
		mu.Lock()
		moved = rm.partitions()[0]
		mu.Unlock()
		wait.Within(t, 10*time.Second, "A's old claim to give up on offset 5 (RevokeTimeout) and be released", func() bool {
			return logs.has("kafka partition released with messages still in flight; they will be delivered again")
		})
		cancel()
		<-done
		if err := raw.Close(); err != nil {
			t.Logf("raw member closed: %v", err)
		}
		select {
		case <-back:
		case <-time.After(20 * time.Second):
			t.Fatal("the partition did not come back to A")
		}
		unblock() // the old claim's late ack
		wait.Within(t, 30*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, a)
		mu.Lock()
		defer mu.Unlock()
		if len(violations) > 0 {
			t.Fatalf("%d commits covered offsets the new claim had not handled; first: %s", len(violations), violations[0])
		}
	})
}
