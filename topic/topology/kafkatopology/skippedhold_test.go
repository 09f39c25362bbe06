package kafkatopology

import (
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a record of a hold topic that this backend did not write,
// the last one of its partition, is committed past by the releaser once
// it is skipped, though no letter follows it: the releasers of the next
// run do not meet it again.
func TestAHoldRecordSkippedLastIsCommittedPast(t *testing.T) {
	b, hold := skipStrayHoldRecord(t, "stray")
	committed := func() int64 {
		resp, err := b.admin.ListConsumerGroupOffsets(hold+":release", map[string][]int32{hold: {0}})
		if err != nil || resp.GetBlock(hold, 0) == nil {
			return -1
		}
		return resp.GetBlock(hold, 0).Offset
	}
	wait.For(t, "the releaser to commit past the record it skipped", func() bool { return committed() == 1 },
		func() string { return "committed offset " + strconv.FormatInt(committed(), 10) })
}

// skipStrayHoldRecord declares topology name with a 1s hold on a backend
// of its own, writes a record that the backend did not hold to partition 0
// of the hold topic, and waits until the releaser skipped it. It returns
// the backend and the hold topic's Kafka name.
func skipStrayHoldRecord(t *testing.T, name string) (*Backend[msg], string) {
	t.Helper()
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New(name).Hold(time.Second))
	hold := q.(*queues[msg]).holds[0].name
	if err := b.send(&sarama.ProducerMessage{Topic: hold, Partition: 0, Value: sarama.StringEncoder(`{"N":1}`)}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the releaser to skip the record", func() bool { return b.Stats().SkippedHoldRecords == 1 })
	return b, hold
}
