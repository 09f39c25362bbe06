package kafka_test

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// byTime reports whether req is a ListOffsets request by time: a start
// offset lookup of OffsetTimestamp.
func byTime(req kmsg.Request) bool {
	return slices.ContainsFunc(req.(*kmsg.ListOffsetsRequest).Topics, func(rt kmsg.ListOffsetsRequestTopic) bool {
		return slices.ContainsFunc(rt.Partitions, func(rp kmsg.ListOffsetsRequestTopicPartition) bool { return rp.Timestamp >= 0 })
	})
}

// refuseListings makes c answer each ListOffsets request by time with
// code for every partition it names, as long as refuse (called once per
// such request, on the cluster's loop) returns true; it returns how many
// it refused.
func refuseListings(c *kfake.Cluster, code *kerr.Error, refuse func() bool) *atomic.Int32 {
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !byTime(req) || !refuse() {
			return nil, nil, false
		}
		refused.Add(1)
		return testbroker.RefuseListOffsets(req, code.Code), nil, true
	})
	return &refused
}

// Guarantee: a start offset listing (OffsetTimestamp) that the cluster
// refuses with an error Kafka says not to retry ends the member, with
// either client: Run returns within a bound, before the lookup's second
// retry would start, with an error wrapping ErrDenied (an authorization
// refusal) or ErrStartRefused (any other such error) and the broker's
// error, naming the start offsets and the partition, so that the
// pipeline's restart policy decides, rather than the member listing again
// for ever (or, with sarama, ending its session and rejoining the group
// one generation after another). Each partition is listed at most once.
func TestRunFailsWhenTheStartOffsetListingIsRefusedForGood(t *testing.T) {
	for _, tc := range []struct {
		code *kerr.Error
		want error
	}{
		{kerr.TopicAuthorizationFailed, kafka.ErrDenied},
		{kerr.InvalidRequest, kafka.ErrStartRefused},
	} {
		t.Run(tc.code.Message, func(t *testing.T) {
			if kerr.IsRetriable(tc.code) {
				t.Fatalf("%v is retriable", tc.code)
			}
			eachClient(t, func(t *testing.T, cl client) {
				const partitions = 2
				c := newCluster(t, partitions, kfake.NumBrokers(1))
				produce(t, c, partitions, 0, 10)
				refused := refuseListings(c, tc.code, func() bool { return true })
				o := sourceOptions(c, "g-lookup-refused")
				o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, time.Now().Add(-time.Hour)
				// The lookup's retries would come 1s, then 2s, then 4s
				// later: a refusal for good fails before the second.
				start := time.Now()
				err := runStage(t, cl.new(t, o), 20*time.Second)
				if brokerErr := cl.brokerErr(tc.code); !errors.Is(err, tc.want) || !errors.Is(err, brokerErr) {
					t.Fatalf("Run = %v, want an error wrapping %v and %v", err, tc.want, brokerErr)
				}
				if msg := err.Error(); !strings.Contains(msg, "start offsets") || !strings.Contains(msg, `"`+testTopic+`"/`) {
					t.Fatalf("Run's error %q does not name the start offsets and the partition", msg)
				}
				// franz-go lists both partitions in one request, sarama
				// each claim's on its own.
				if n := refused.Load(); n > partitions {
					t.Fatalf("the listing was refused %d times after %v: the member kept looking", n, time.Since(start))
				}
			})
		})
	}
}

// Guarantee: a start offset listing refused with an error Kafka says to
// retry (LEADER_NOT_AVAILABLE) is retried with backoff within the member,
// with either client: the member does not fail and stays in its group
// generation (no rebalance), and once the cluster answers, the partitions
// start at the start time and every record is delivered.
func TestStartOffsetListingRefusedForNowIsRetried(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 2, kfake.NumBrokers(1))
		start := time.Now().Add(-time.Hour)
		ends := produce(t, c, 2, 0, 10)
		// franz-go lists both partitions in one request, and an attempt
		// fails with its refusal. sarama lists each claim's partition on
		// its own, once more after a metadata refresh when refused: of
		// three refusals, two go to one claim's first attempt, which
		// fails.
		refusals := int32(2)
		if cl.name == saramaClient.name {
			refusals = 3
		}
		var left atomic.Int32
		left.Store(refusals)
		refused := refuseListings(c, kerr.LeaderNotAvailable, func() bool { return left.Add(-1) >= 0 })
		group := "g-lookup-retried"
		o := sourceOptions(c, group)
		o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, start
		l := newLedger()
		done := runOnceInto(t, "lookup-retried", cl.new(t, o), l)
		wait.Within(t, 30*time.Second, "every record once the listing is answered", func() bool { return l.covers(ends) })
		if n := refused.Load(); n != refusals {
			t.Fatalf("the listing was refused %d times, want %d", n, refusals)
		}
		if gi := c.GroupInfo(group); gi == nil || gi.Epoch != 1 {
			t.Fatalf("group %q is %+v once every record was delivered, want generation 1: the refusals made the member rejoin", group, gi)
		}
		expectRunning(t, done, "after the listing was refused with a retriable error")
	})
}

// Guarantee: a claim whose start offset listing the cluster keeps
// refusing with an error Kafka says to retry lets its partition go as
// soon as a rebalance takes it (range: the session ends;
// cooperative-sticky: the claim is revoked while the session goes on),
// rather than hold the rebalance until Rebalance.Timeout (1m here): a
// joining member gets a partition within seconds, and once the cluster
// answers, every record is delivered.
func TestRebalanceDoesNotWaitForARetriedStartOffsetListing(t *testing.T) {
	eachStrategy(t, func(t *testing.T, cl client, strategy string) {
		c := newCluster(t, 2, kfake.NumBrokers(1))
		start := time.Now().Add(-time.Hour)
		ends := produce(t, c, 2, 0, 20)
		var answer atomic.Bool
		refused := refuseListings(c, kerr.LeaderNotAvailable, func() bool { return !answer.Load() })
		group := "g-lookup-rebalanced"
		l := newLedger()
		member := func(name string) {
			o := sourceOptions(c, group)
			o.InitialOffset, o.StartTime, o.Rebalance = kafka.OffsetTimestamp, start, strategy
			cfg := *o.Config
			cfg.Consumer.Group.Session.Timeout = 45 * time.Second
			cfg.Consumer.Group.Rebalance.Timeout = time.Minute
			o.Config = &cfg
			p := startPipeline(t, pipelineOpts(name, cl.new(t, o), 1, l, nil))
			t.Cleanup(func() { stopPipeline(t, p) })
		}
		assigned := func(gi *kfake.GroupInfo) []int {
			var n []int
			for _, gm := range gi.Members {
				n = append(n, len(gm.Assignment[testTopic]))
			}
			return n
		}
		member("a")
		wait.Within(t, 20*time.Second, "the first member to hold both partitions, its listing refused", func() bool {
			gi := c.GroupInfo(group)
			return refused.Load() > 0 && gi != nil && gi.State == "Stable" && slices.Equal(assigned(gi), []int{2})
		})
		joined := time.Now()
		member("b")
		wait.Within(t, 15*time.Second, "each member to hold one partition (a held claim holds the rebalance)", func() bool {
			gi := c.GroupInfo(group)
			return gi != nil && gi.State == "Stable" && slices.Equal(assigned(gi), []int{1, 1})
		})
		t.Logf("the group was rebalanced %v after the second member started", time.Since(joined).Round(time.Millisecond))
		answer.Store(true)
		wait.Within(t, 30*time.Second, "every record once the listing is answered", func() bool { return l.covers(ends) })
	})
}

// Guarantee: with the franz-go source, a claimed partition that has a
// committed offset starts there without waiting for the start offset
// listing of the member's other new partitions (OffsetTimestamp, no
// committed offset): while the cluster leaves that listing unanswered,
// the committed partition's records are delivered, and the others' are
// not.
func TestCommittedPartitionDoesNotWaitForTheStartOffsetListing(t *testing.T) {
	c := newCluster(t, 2, kfake.NumBrokers(1))
	group := "g-lookup-committed"
	ends := produce(t, c, 2, 0, 20)
	commitOutside(t, c, group, map[int32]int64{0: 0})
	testbroker.HangKafkaKey(t, c, kmsg.ListOffsets)
	o := sourceOptions(c, group)
	o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, time.Now().Add(-time.Hour)
	l := newLedger()
	p := startPipeline(t, pipelineOpts("lookup-committed", newFranz(t, o), 1, l, nil))
	defer stopPipeline(t, p)
	wait.Within(t, 20*time.Second, "partition 0's records while the listing of partition 1 is unanswered", func() bool {
		return l.covers(map[int32]int64{0: ends[0]})
	})
	if got := l.handledPrefix(2)[1]; got != 0 {
		t.Fatalf("partition 1 delivered %d records before its start offset was listed", got)
	}
}
