package kafkatopic_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// fullReadAhead sets a backend's options so that its subscribers' clients
// buffer one record per partition, and the log ends are listed often.
func fullReadAhead(o *kafkatopic.Options[int]) {
	o.Config.ChannelBufferSize = 1
	o.HighWaterInterval = 50 * time.Millisecond
}

// publishN publishes the values from..to-1 to h.
func publishN(t *testing.T, h *topic.Handle[int], from, to int) {
	t.Helper()
	for v := from; v < to; v++ {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
	}
}

// onlyPartition returns the one partition h's Stats list, and whether it
// lists exactly one.
func onlyPartition(h *topic.Handle[int]) (topic.PartitionStats, bool) {
	ps := h.Stats().Partitions
	if len(ps) != 1 {
		return topic.PartitionStats{}, false
	}
	return ps[0], true
}

// Guarantee: a balanced group whose subscriber holds what it received
// without settling it (a handler that blocks) shows its partition's lag
// growing with every record published, those published while its
// read-ahead is full and its client no longer fetches included, within
// Options.HighWaterInterval; the partition is listed under the group's
// Kafka consumer group.
func TestABalancedGroupsLagGrowsAsRecordsArePublishedWhileItsReadAheadIsFull(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	fullReadAhead(&o)
	h := newTopic(t, newBackend(t, o), "lagging", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}})
	s := subscribe(t, h, topic.Balanced("g"))
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) }
	const first, later = 8, 8
	publishN(t, h, 0, first)
	recv(t, s) // never settled
	wait.Within(t, patience, "the first records counted", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.HighWater == first && p.Lag == first-p.Committed
	}, state)
	p, _ := onlyPartition(h)
	if want := kafkatopic.GroupID("lagging", "g"); p.Group != want || p.Partition != 0 || p.Committed != 0 || p.FetchErr != nil {
		t.Fatalf("Stats().Partitions = %+v, want partition 0 of group %q, committed 0, no fetch error", h.Stats().Partitions, want)
	}
	publishN(t, h, first, first+later)
	wait.Within(t, patience, "the records published while the read-ahead is full counted in the lag", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.HighWater == first+later && p.Lag == first+later
	}, state)
}

// Guarantee: a broadcast subscriber's partitions are listed with no
// group, its position (the offset after the last record it received) as
// Committed and the records published that it has not received as its
// lag, those published while its read-ahead is full included.
func TestABroadcastSubscribersPartitionsShowItsPositionAndLag(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	fullReadAhead(&o)
	h := newTopic(t, newBackend(t, o), "told", topic.Options{Mode: topic.Mixed, Broadcast: topic.BroadcastPolicy{Capacity: 1}})
	s := subscribe(t, h, topic.Broadcast())
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) }
	const first, later = 8, 8
	publishN(t, h, 0, first)
	for range 2 {
		recv(t, s)
	}
	wait.Within(t, patience, "the subscriber's position and the first records counted", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.Group == "" && p.Committed == 2 && p.HighWater == first && p.Lag == first-2
	}, state)
	publishN(t, h, first, first+later)
	wait.Within(t, patience, "the records published while the read-ahead is full counted in the lag", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.Committed == 2 && p.HighWater == first+later && p.Lag == first+later-2
	}, state)
}

// Guarantee: while an ACL denies READ on the topic, the partitions its
// balanced member claims and its broadcast subscriber reads are listed
// with their fetches failing, the refusal as FetchErr.
func TestPartitionsWhoseFetchesAreDeniedShowTheirFetchesFailing(t *testing.T) {
	k := testbroker.KafkaWithACLs(t)
	o := testOptions[int](k.Cluster, topic.IntCodec{})
	o.Config = k.Config()
	h := newTopic(t, newBackend(t, o), "denied", topic.Options{Mode: topic.Mixed})
	subscribe(t, h, topic.Balanced("g"))
	subscribe(t, h, topic.Broadcast())
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) }
	wait.Within(t, patience, "both readers' partitions listed, their fetches not failing", func() bool {
		ps := h.Stats().Partitions
		return len(ps) == 2 && ps[0].FetchErr == nil && ps[1].FetchErr == nil
	}, state)
	k.Deny(t, "denied", sarama.AclOperationRead)
	wait.Within(t, patience, "both readers' fetches failing with the refusal", func() bool {
		ps := h.Stats().Partitions
		return len(ps) == 2 && ps[0].Group == "" && ps[1].Group == kafkatopic.GroupID("denied", "g") &&
			errors.Is(ps[0].FetchErr, sarama.ErrTopicAuthorizationFailed) &&
			errors.Is(ps[1].FetchErr, sarama.ErrTopicAuthorizationFailed)
	}, state)
}

// Guarantee: a partition that several broadcast subscribers read is
// listed once per subscriber, the one furthest behind first, whichever
// subscribed first.
func TestAPartitionReadBySeveralSubscribersListsTheOneFurthestBehindFirst(t *testing.T) {
	c := testbroker.Kafka(t)
	h := newTopic(t, newBackend(t, testOptions[int](c, topic.IntCodec{})), "shared", topic.Options{Mode: topic.Mixed})
	ahead := subscribe(t, h, topic.Broadcast())
	behind := subscribe(t, h, topic.Broadcast())
	publishN(t, h, 0, 4)
	for range 3 {
		recv(t, ahead)
	}
	recv(t, behind)
	want := []int64{1, 3}
	wait.Within(t, patience, "both subscribers' positions listed, the one behind first", func() bool {
		ps := h.Stats().Partitions
		return len(ps) == 2 && ps[0].Committed == want[0] && ps[1].Committed == want[1]
	}, func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) })
}

// Guarantee: a broadcast subscriber's position moves past a record that
// does not decode once it has received the records of the partition
// fetched before it, even when no record follows it: its lag falls to 0.
func TestABroadcastSubscribersPositionPassesAnUndecodableRecordBehindQueuedOnes(t *testing.T) {
	c := testbroker.Kafka(t)
	h := newTopic(t, newBackend(t, testOptions[int](c, topic.IntCodec{})), "skipped-last", topic.Options{Mode: topic.Mixed})
	s := subscribe(t, h, topic.Broadcast())
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) }
	publishN(t, h, 0, 2)
	produceGarbage(t, c.ListenAddrs(), "skipped-last", 0, 1)
	// The record that does not decode is skipped while the two before it
	// wait to be received.
	wait.Within(t, patience, "the record that does not decode skipped", func() bool { return h.Stats().Undecodable == 1 }, state)
	for range 2 {
		recv(t, s)
	}
	wait.Within(t, patience, "the position past the skipped record, no lag", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.HighWater == 3 && p.Committed == 3 && p.Lag == 0
	}, state)
}

// Guarantee: under drop_oldest, a broadcast subscriber that fell below
// the log start and received the lag notice has its position at the
// oldest record kept: the records retention deleted are not counted in
// its lag.
func TestABroadcastSubscribersPositionMovesToTheLogStartWithItsLagNotice(t *testing.T) {
	const n = 40
	h, s := lagSetup(t, topic.DropOldest, n, n) // every record deleted
	for {
		if it := recv(t, s); it.Lagged > 0 {
			break
		}
	}
	wait.Within(t, patience, "the position at the log start, no lag", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.HighWater == n && p.Committed == n && p.Lag == 0
	}, func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) })
}

// Guarantee: Close does not wait for a listing of the partitions' log
// ends that the cluster leaves unanswered: the listing is cut short as
// the closing begins, so Close returns nil long before its deadline, and
// no goroutine of it is left.
func TestCloseDoesNotWaitForAnUnansweredListingOfLogEnds(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	fullReadAhead(&o)
	b := newBackend(t, o)
	h := newTopic(t, b, "unanswered", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}})
	subscribe(t, h, topic.Balanced("g"))
	publishN(t, h, 0, 1)
	wait.Within(t, patience, "the partition's log end listed", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.HighWater == 1
	})
	<-testbroker.HangKafkaKey(t, c, kmsg.ListOffsets)
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close while a listing of the log ends waits for the cluster = %v, want nil before its %v deadline", err, testbroker.HungGrace)
	}
	goleak.VerifyNone(t, append(testbroker.HungKafka(), before)...)
}

// Guarantee: once the topic of a broadcast subscriber is deleted and
// created again, the subscriber's position is the new partition's oldest
// record, where it reads it from: the records published to the new topic
// count in its lag, against the new partition's log end, before it
// receives any, those of the old topic it still holds move it no more,
// and it follows the records of the new topic it receives.
func TestABroadcastSubscribersPositionBeginsAnewWithItsTopicCreatedAgain(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.HighWaterInterval = 50 * time.Millisecond
	h := newTopic(t, newBackend(t, o), "again", topic.Options{Mode: topic.BroadcastOnly})
	s := subscribe(t, h, topic.Broadcast())
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) }
	publishN(t, h, 0, 3)
	recv(t, s)
	wait.Within(t, patience, "the position past the first record of the old topic", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.Committed == 1 && p.HighWater == 3 && p.Lag == 2
	}, state)
	// Fewer records than the subscriber read of the old topic.
	createAgain(t, c, h, func() {}, 10, 11)
	wait.Within(t, patience, "the position at the new partition's start, both records in the lag", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.Committed == 0 && p.HighWater == 2 && p.Lag == 2
	}, state)
	for _, v := range []int{1, 2} {
		if it := recv(t, s); it.Value != v {
			t.Fatalf("received %+v, want value %d of the old topic", it, v)
		}
	}
	if p, ok := onlyPartition(h); !ok || p.Committed != 0 || p.Lag != 2 {
		t.Fatalf("once the old topic's records are received, %s; want the position still at 0, lag 2", state())
	}
	for _, v := range []int{10, 11} {
		if it := recv(t, s); it.Value != v || it.Lagged != 0 {
			t.Fatalf("received %+v, want value %d", it, v)
		}
	}
	wait.Within(t, patience, "the position past the records received", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.Committed == 2 && p.HighWater == 2 && p.Lag == 0
	}, state)
}

// Guarantee: a balanced group whose committed offset retention has
// deleted reads its partition again from the oldest record kept, and its
// lag counts from there, not from offset 0: the records deleted are not
// counted, once the member has fetched a record.
func TestABalancedGroupsLagCountsFromTheOldestRecordKeptOnceItsCommittedOffsetIsDeleted(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	fullReadAhead(&o)
	h := newTopic(t, newBackend(t, o), "trimmed", topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1}})
	subscribe(t, h, topic.Balanced("g")).Close() // the group's offset: 0
	const n, cut = 40, 30
	publishN(t, h, 0, n)
	admin := testbroker.Admin(t, c.ListenAddrs())
	if err := admin.DeleteRecords("trimmed", map[int32]int64{0: cut}); err != nil {
		t.Fatal(err)
	}
	s := subscribe(t, h, topic.Balanced("g"))
	if it := recv(t, s); it.Value != cut { // never settled
		t.Fatalf("received %+v, want value %d, the oldest kept", it, cut)
	}
	wait.Within(t, patience, "the lag counted from the oldest record kept", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.HighWater == n && p.Lag == n-cut
	}, func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) })
}
