package kafkatopic_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// createdAgainLine is the INFO line of a broadcast subscriber that saw its
// topic's ID change.
const createdAgainLine = "broadcast subscriber's topic was created again"

// Guarantee: a broadcast subscriber whose fetches fail while its topic is
// deleted, and whose topic, created again, receives more records than the
// subscriber had read of the old one before a fetch succeeds again (its
// next offset is within the new partition, so no fetch is out of range),
// checks the topic's ID before it queues the first record fetched after
// the failures, sees it changed, and reads the new partition from its
// oldest record: every record of the new topic reaches it, in order, with
// no lag notice, and one INFO line says so.
func TestABroadcastSubscriberWhoseFetchesFailedReadsEveryRecordOfItsTopicCreatedAgain(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.HighWaterInterval = time.Hour // the check after the failed fetches only
	var logs logBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h, s := readAgain(t, o)
	held := testbroker.HoldFetches(c, kerr.UnknownTopicOrPartition.Code)
	createAgain(t, c, h, func() {
		wait.Within(t, patience, "the subscriber's fetches to fail", func() bool {
			return strings.Contains(logs.String(), "broadcast consumer error")
		})
	}, newValues...)
	held.Store(false)
	receiveAgain(t, s)
	if n := strings.Count(logs.String(), createdAgainLine); n != 1 {
		t.Fatalf("%d lines %q, want 1:\n%s", n, createdAgainLine, logs.String())
	}
}

// Guarantee: a broadcast subscriber that fetches nothing while its topic
// is deleted and created again (its fetches answered with no records, as
// for a read-ahead that is full) sees the topic's ID change within
// Options.HighWaterInterval, and reads the new partition from its oldest
// record, even though the new topic holds more records than the
// subscriber had read of the old one: every record of the new topic
// reaches it, in order, with no lag notice.
func TestABroadcastSubscriberThatFetchedNothingReadsEveryRecordOfItsTopicCreatedAgain(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.HighWaterInterval = 50 * time.Millisecond
	var logs logBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h, s := readAgain(t, o)
	held := testbroker.HoldFetches(c, 0)
	createAgain(t, c, h, func() {}, newValues...)
	wait.Within(t, patience, "the subscriber to see its topic's ID change", func() bool {
		return strings.Contains(logs.String(), createdAgainLine)
	})
	held.Store(false)
	receiveAgain(t, s)
}

// readCount is how many records the subscribers of readAgain read of the
// old topic.
const readCount = 3

// readAgain makes a broadcast-only topic "again" of a backend with o,
// and a subscriber of it that receives the readCount records published.
func readAgain(t *testing.T, o kafkatopic.Options[int]) (*topic.Handle[int], *topic.Subscription[int]) {
	t.Helper()
	h := newTopic(t, newBackend(t, o), "again", topic.Options{Mode: topic.BroadcastOnly})
	s := subscribe(t, h, topic.Broadcast())
	for v := range readCount {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
		if it := recv(t, s); it.Value != v || it.Lagged != 0 {
			t.Fatalf("received %+v, want value %d", it, v)
		}
	}
	return h, s
}

// createAgain deletes the Kafka topic "again" of c, calls deleted,
// creates the topic again with one partition, and publishes values to it
// through h.
func createAgain(t *testing.T, c *kfake.Cluster, h *topic.Handle[int], deleted func(), values ...int) {
	t.Helper()
	admin := testbroker.Admin(t, c.ListenAddrs())
	if err := admin.DeleteTopic("again"); err != nil {
		t.Fatal(err)
	}
	deleted()
	if err := admin.CreateTopic("again", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		wait.Within(t, patience, "a publish to the topic created again to be stored", func() bool {
			return h.Publish(ctxT(t), v) == nil
		})
	}
}

// newValues are the values the tests of a broadcast subscriber that
// read readCount records of the old topic publish to the topic created
// again: more than it read.
var newValues = []int{10, 11, 12, 13, 14}

// receiveAgain receives newValues on s, in order, with no lag notice.
func receiveAgain(t *testing.T, s *topic.Subscription[int]) {
	t.Helper()
	for i, v := range newValues {
		if it := recv(t, s); it.Value != v || it.Lagged != 0 {
			t.Fatalf("received %+v, want value %d, record %d of the topic created again", it, v, i)
		}
	}
}

// Guarantee: once a broadcast subscriber reads its topic created again,
// the log end listed of the old topic no longer counts in its Stats: its
// high-water mark and lag are the new partition's, even while the
// listings of the log ends fail (which otherwise keep the end listed
// before).
func TestABroadcastSubscribersHighWaterForgetsTheOldTopicsListedEnd(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.HighWaterInterval = 50 * time.Millisecond
	// The listing asks at the consumers' isolation level, the client's
	// own lookups at none: failListings tells them apart by it.
	o.Config.Consumer.IsolationLevel = sarama.ReadCommitted
	h := newTopic(t, newBackend(t, o), "again", topic.Options{Mode: topic.BroadcastOnly})
	s := subscribe(t, h, topic.Broadcast())
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) }
	const old = 10
	publishN(t, h, 0, old)
	for range old {
		recv(t, s)
	}
	wait.Within(t, patience, "the old topic's log end listed", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.Committed == old && p.HighWater == old
	}, state)
	failListings(c)
	createAgain(t, c, h, func() {}, 10, 11)
	wait.Within(t, patience, "the new partition's high-water mark, both records in the lag", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.Committed == 0 && p.HighWater == 2 && p.Lag == 2
	}, state)
}

// failListings makes c answer every ListOffsets request at the
// read_committed isolation level (the backend's listings of log ends
// under sarama.ReadCommitted; sarama's client asks its own at none) with
// an error for each partition.
func failListings(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lreq := req.(*kmsg.ListOffsetsRequest)
		if lreq.IsolationLevel != 1 {
			return nil, nil, false
		}
		return testbroker.Refusal(lreq, kerr.UnknownServerError.Code), nil, true
	})
}

// Guarantee: a balanced group whose committed offset retention has
// deleted, together with every record of the partition, counts no lag:
// it reads from the log start, which is the log end, before any record
// arrives.
func TestABalancedGroupWhoseLogRetentionEmptiedCountsNoLag(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	fullReadAhead(&o)
	h := newTopic(t, newBackend(t, o), "emptied", topic.Options{})
	subscribe(t, h, topic.Balanced("g")).Close() // the group's offset: 0
	const n = 10
	publishN(t, h, 0, n)
	admin := testbroker.Admin(t, c.ListenAddrs())
	if err := admin.DeleteRecords("emptied", map[int32]int64{0: n}); err != nil {
		t.Fatal(err)
	}
	subscribe(t, h, topic.Balanced("g"))
	wait.Within(t, patience, "no lag counted of the emptied log", func() bool {
		p, ok := onlyPartition(h)
		return ok && p.HighWater == n && p.Lag == 0
	}, func() string { return fmt.Sprintf("Stats().Partitions = %+v", h.Stats().Partitions) })
}

// balancedCreatedAgainLine is the INFO line of a balanced subscriber that
// saw its topic's ID change.
const balancedCreatedAgainLine = "balanced subscriber's topic was created again"

// Guarantee: a balanced subscriber whose topic is deleted and created
// again while no fetch of it fails (its fetches answered with no records,
// as for a read-ahead that is full) sees the topic's ID change within
// Options.HighWaterInterval and ends its group session: the group joins
// again from its offsets in the new topic (none: Kafka dropped the old
// ones with it), so every record of the new topic reaches it, in order,
// those below the old offsets among them; the partition count did not
// change, so nothing else would have ended the session.
func TestABalancedSubscriberWhoseTopicIsCreatedAgainBetweenFetchesReadsEveryRecordOfIt(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.HighWaterInterval = 50 * time.Millisecond
	var logs logBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h := newTopic(t, newBackend(t, o), "again", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	for v := range readCount {
		if err := h.Publish(ctxT(t), v); err != nil {
			t.Fatal(err)
		}
		it := recv(t, s)
		if it.Value != v {
			t.Fatalf("received %+v, want value %d", it, v)
		}
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	admin := testbroker.Admin(t, c.ListenAddrs())
	gid := kafkatopic.GroupID("again", "g")
	wait.Within(t, patience, "the group's offset committed past the records acked", func() bool {
		return testbroker.Committed(t, admin, "again", gid)[0] == readCount
	})
	held := testbroker.HoldFetches(c, 0)
	createAgain(t, c, h, func() {}, newValues...)
	wait.Within(t, patience, "the subscriber to see its topic's ID change", func() bool {
		return strings.Contains(logs.String(), balancedCreatedAgainLine)
	})
	held.Store(false)
	for i, v := range newValues {
		it := recv(t, s)
		if it.Value != v {
			t.Fatalf("received %+v, want value %d, record %d of the topic created again\n%s", it, v, i, logs.String())
		}
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: a broadcast subscriber starts while a broker of the cluster
// does not answer metadata requests (one restarting, its connections
// dropped), as long as another does: it asks the other brokers for its
// topic's ID when the one it asked first fails.
func TestABroadcastSubscriberStartsWhileABrokerDoesNotAnswerMetadata(t *testing.T) {
	c := testbroker.Kafka(t, kfake.NumBrokers(3))
	h := newTopic(t, newBackend(t, testOptions[int](c, topic.IntCodec{})), "t", topic.Options{Mode: topic.BroadcastOnly})
	const answering = 0 // the node ID of one of the three
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if c.CurrentNode() == answering {
			return nil, nil, false
		}
		return nil, errors.New("broker restarting"), true // the connection is dropped
	})
	const subscribers = 12 // each asks a broker that does not answer first with odds of 2 in 3
	for i := range subscribers {
		s, err := h.Subscribe(ctxT(t), topic.Broadcast(), topic.SubscriberOptions{})
		if err != nil {
			t.Fatalf("subscriber %d: Subscribe = %v, want a subscription: one broker of three answers", i, err)
		}
		s.Close()
	}
}
