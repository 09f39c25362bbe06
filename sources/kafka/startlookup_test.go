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
	"github.com/boulevard-go/boulevard/sources/kafka/franz"
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

// Guarantee: with the franz-go source, a start offset listing
// (OffsetTimestamp) that the cluster refuses with an error Kafka says not
// to retry ends the member: Run returns within a bound, before the
// lookup's second retry would start, with an error wrapping ErrDenied
// (an authorization refusal) or franz.ErrStartRefused (any other such
// error) and the broker's error, naming the start offsets and the
// partition, so that the pipeline's restart policy decides, rather than
// the member listing again for ever. (The sarama source ends the claim
// and rejoins the group instead, see docs/kafka.md.)
func TestRunFailsWhenTheStartOffsetListingIsRefusedForGood(t *testing.T) {
	for _, tc := range []struct {
		code *kerr.Error
		want error
	}{
		{kerr.TopicAuthorizationFailed, kafka.ErrDenied},
		{kerr.InvalidRequest, franz.ErrStartRefused},
	} {
		t.Run(tc.code.Message, func(t *testing.T) {
			if kerr.IsRetriable(tc.code) {
				t.Fatalf("%v is retriable", tc.code)
			}
			c := newCluster(t, 2, kfake.NumBrokers(1))
			produce(t, c, 2, 0, 10)
			refused := refuseListings(c, tc.code, func() bool { return true })
			o := sourceOptions(c, "g-lookup-refused")
			o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, time.Now().Add(-time.Hour)
			// The lookup's retries would come 1s, then 2s, then 4s later:
			// a refusal for good fails before the second.
			start := time.Now()
			err := runStage(t, newFranz(t, o), 20*time.Second)
			if !errors.Is(err, tc.want) || !errors.Is(err, tc.code) {
				t.Fatalf("Run = %v, want an error wrapping %v and %v", err, tc.want, tc.code)
			}
			if msg := err.Error(); !strings.Contains(msg, "start offsets") || !strings.Contains(msg, `"`+testTopic+`"/`) {
				t.Fatalf("Run's error %q does not name the start offsets and the partition", msg)
			}
			if n := refused.Load(); n > 2 {
				t.Fatalf("the listing was refused %d times after %v: the member kept looking", n, time.Since(start))
			}
		})
	}
}

// Guarantee: with the franz-go source, a start offset listing refused
// with an error Kafka says to retry (LEADER_NOT_AVAILABLE) is retried
// with backoff within the member, which does not fail: once the cluster
// answers, the partitions start at the start time and every record is
// delivered.
func TestStartOffsetListingRefusedForNowIsRetried(t *testing.T) {
	c := newCluster(t, 2, kfake.NumBrokers(1))
	start := time.Now().Add(-time.Hour)
	ends := produce(t, c, 2, 0, 10)
	var left atomic.Int32
	left.Store(2)
	refused := refuseListings(c, kerr.LeaderNotAvailable, func() bool { return left.Add(-1) >= 0 })
	o := sourceOptions(c, "g-lookup-retried")
	o.InitialOffset, o.StartTime = kafka.OffsetTimestamp, start
	l := newLedger()
	done := runOnceInto(t, "lookup-retried", newFranz(t, o), l)
	wait.Within(t, 30*time.Second, "every record once the listing is answered", func() bool { return l.covers(ends) })
	if n := refused.Load(); n != 2 {
		t.Fatalf("the listing was refused %d times, want 2", n)
	}
	select {
	case err := <-done:
		t.Fatalf("Run = %v after the listing was refused with a retriable error", err)
	default:
	}
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
