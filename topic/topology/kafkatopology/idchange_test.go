package kafkatopology

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// The INFO lines of a reader that saw its topic's ID change.
const (
	broadcastCreatedAgainLine = "broadcast reader's topic was created again"
	groupCreatedAgainLine     = "group reader's topic was created again"
)

// idReadCount is how many letters the readers of readThenCreateAgain
// read of the old topic, and idNewCount how many are published to the
// topic created again: more, so that no fetch of the new partition is out
// of its range.
const (
	idReadCount = 3
	idNewCount  = 5
)

// readThenCreateAgain declares tb (its main topic of one partition) on a
// backend of c that checks its topics every interval, subscribes a
// reader, publishes idReadCount letters and receives them (settling
// each), and calls read. It then answers the fetches with no records and
// the error code errCode (testbroker.HoldFetches), deletes the main
// topic, calls deleted with the logs, creates the topic again, publishes
// idNewCount letters (N from 100 on) and, when seen is not empty, waits
// for a line with it to be logged. It then lets the fetches be answered
// and returns the reader and the logs.
func readThenCreateAgain(t *testing.T, tb *topology.Builder, interval time.Duration, errCode int16,
	read func(q *queues[msg]), deleted func(logs *lockedBuffer), seen string) (topology.Reader[msg], *lockedBuffer) {
	t.Helper()
	c := testbroker.Kafka(t)
	logs := &lockedBuffer{}
	b := newLoggedBackend(t, c.ListenAddrs(), logs, func(o *Options[msg]) {
		o.Partitions, o.HighWaterInterval = 1, interval
	})
	q := declare(t, b, tb).(*queues[msg])
	r := subscribe(t, q)
	for n := range idReadCount {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
		l := receiveOne(t, r)
		if l.Value.N != n {
			t.Fatalf("received %+v, want letter %d", l.Value, n)
		}
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
	read(q)
	held := testbroker.HoldFetches(c, errCode)
	admin := testbroker.Admin(t, c.ListenAddrs())
	if err := admin.DeleteTopic(q.main); err != nil {
		t.Fatal(err)
	}
	deleted(logs)
	if err := admin.CreateTopic(q.main, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	for n := 100; n < 100+idNewCount; n++ {
		wait.For(t, "a publish to the topic created again to be stored", func() bool {
			return q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}) == nil
		})
	}
	if seen != "" {
		wait.For(t, "the reader to see its topic's ID change", func() bool { return strings.Contains(logs.String(), seen) },
			func() string { return logs.String() })
	}
	held.Store(false)
	return r, logs
}

// receiveNew receives the idNewCount letters published to the topic
// created again on r, in order.
func receiveNew(t *testing.T, r topology.Reader[msg], logs *lockedBuffer) {
	t.Helper()
	for i := range idNewCount {
		l := receiveOne(t, r)
		if l.Value.N != 100+i {
			t.Fatalf("received letter %d, want %d, letter %d of the topic created again\n%s", l.Value.N, 100+i, i, logs.String())
		}
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee: a broadcast reader that fetches nothing while its topic is
// deleted and created again (its fetches answered with no records, as
// for a read-ahead that is full) sees the topic's ID change within
// Options.HighWaterInterval and reads the new partition from its oldest
// record, even though the new topic holds more records than the reader
// had read of the old one: every letter of the new topic reaches it, in
// order.
func TestABroadcastReaderThatFetchedNothingReadsEveryLetterOfItsTopicCreatedAgain(t *testing.T) {
	r, logs := readThenCreateAgain(t, topology.New("again").Broadcast(), 50*time.Millisecond, 0,
		func(*queues[msg]) {}, func(*lockedBuffer) {}, broadcastCreatedAgainLine)
	receiveNew(t, r, logs)
}

// Guarantee: a broadcast reader whose fetches fail while its topic is
// deleted, and whose topic, created again, receives more records than the
// reader had read of the old one before a fetch succeeds again (its next
// offset is within the new partition, so no fetch is out of range),
// checks the topic's ID before it buffers the first record fetched after
// the failures, sees it changed, and reads the new partition from its
// oldest record: every letter of the new topic reaches it, in order, and
// one INFO line says so.
func TestABroadcastReaderWhoseFetchesFailedReadsEveryLetterOfItsTopicCreatedAgain(t *testing.T) {
	r, logs := readThenCreateAgain(t, topology.New("again").Broadcast(), time.Hour, kerr.UnknownTopicOrPartition.Code,
		func(*queues[msg]) {}, func(logs *lockedBuffer) {
			wait.For(t, "the reader's fetches to fail", func() bool {
				return strings.Contains(logs.String(), "broadcast consumer error")
			}, func() string { return logs.String() })
		}, "")
	receiveNew(t, r, logs)
	if n := strings.Count(logs.String(), broadcastCreatedAgainLine); n != 1 {
		t.Fatalf("%d lines %q, want 1:\n%s", n, broadcastCreatedAgainLine, logs.String())
	}
}

// Guarantee: a group reader whose topic is deleted and created again
// while no fetch of it fails (its fetches answered with no records, as
// for a read-ahead that is full) sees the topic's ID change within
// Options.HighWaterInterval and ends its session, as when a fetch finds
// the topic unknown: the group joins again from its offsets in the new
// topic (none: Kafka dropped the old ones with it), so every letter of
// the new topic reaches it, in order, those below the old offsets among
// them.
func TestAGroupReaderWhoseTopicIsCreatedAgainBetweenFetchesReadsEveryLetterOfIt(t *testing.T) {
	r, logs := readThenCreateAgain(t, topology.New("again"), 50*time.Millisecond, 0, func(q *queues[msg]) {
		wait.For(t, "the group's offset committed past the letters settled", func() bool {
			return committedOffset(t, q.b.opts.Brokers, q.main, q.groupID(), 0) == idReadCount
		})
	}, func(*lockedBuffer) {}, groupCreatedAgainLine)
	receiveNew(t, r, logs)
}
