package kafkatopic_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// produceGarbage writes n records no codec of the tests decodes to
// partition part of kname.
func produceGarbage(t *testing.T, addrs []string, kname string, part int32, n int) {
	t.Helper()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: kname, Partition: part, Value: sarama.StringEncoder("not an int")}
	}
	produceRecords(t, addrs, msgs)
}

// produceRecords writes msgs, each to the partition it names, with a
// producer of its own.
func produceRecords(t *testing.T, addrs []string, msgs []*sarama.ProducerMessage) {
	t.Helper()
	pc := testbroker.SaramaConfig()
	pc.Producer.Return.Successes = true
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(addrs, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: a burst of records that do not decode on one partition is
// logged in a few lines, for the group and for a broadcast subscriber: the
// first in full, the rest counted (held_back, with the first and the last
// offset held back) and said when the subscription closes; every record
// is counted in Stats().Undecodable.
func TestABurstOfUndecodableRecordsIsLoggedInAFewLines(t *testing.T) {
	c := testbroker.Kafka(t)
	var lines logtest.Lines
	o := testOptions(c, topic.Codec[int](topic.IntCodec{}))
	o.Partitions = 2
	o.Logger = slog.New(slog.NewTextHandler(&lines, nil))
	b := newBackend(t, o)
	h := newTopic(t, b, "garbage-burst", topic.Options{Mode: topic.Mixed})
	m := subscribe(t, h, topic.Balanced("g"))
	bc := subscribe(t, h, topic.Broadcast())
	const garbage = 200
	produceGarbage(t, c.ListenAddrs(), "garbage-burst", 1, garbage)
	wait.Within(t, patience, "every record that does not decode counted", func() bool { return h.Stats().Undecodable == 2*garbage },
		func() string { return strings.Join(lines.All(), "") })
	m.Close()
	bc.Close()
	if n := h.Stats().Undecodable; n != 2*garbage {
		t.Fatalf("Stats().Undecodable = %d, want %d (the group's and the broadcast subscriber's)", n, 2*garbage)
	}
	all := func() string { return strings.Join(lines.All(), "") }
	records, told := lines.Told("record does not decode")
	group, groupTold := lines.Told("record does not decode; skipped and committed")
	if group > 3 || groupTold != garbage || records-group > 3 || told-groupTold != garbage {
		t.Errorf("the group logged %d lines telling of %d records, the broadcast subscriber %d telling of %d; want at most 3 telling of %d each:\n%s",
			group, groupTold, records-group, told-groupTold, garbage, all())
	}
	// The line after a burst, or the one its subscription logs as it
	// closes, says where the records held back are.
	where := []string{"record does not decode", "partition=1", logburst.HeldBackKey + "=", "held_back_first=", "held_back_last="}
	if n, g := lines.Count(where...), lines.Count(append(where, "skipped and committed")...); g == 0 || n-g == 0 {
		t.Errorf("%d lines of the group and %d of the broadcast subscriber say which records were held back; want at least 1 each:\n%s", g, n-g, all())
	}
}

// Guarantee: a record that does not decode is committed past even when no
// record after it is acked: the member that leaves commits the offset after
// it, and the group's next member does not read it again.
func TestAnUndecodableLastRecordIsCommittedPast(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
	h := newTopic(t, b, "undecodable-last", topic.Options{})
	m := subscribe(t, h, topic.Balanced("g"))
	if err := h.Publish(ctxT(t), 7); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, m); it.Value != 7 {
		t.Fatalf("received %d, want 7", it.Value)
	} else if err := m.Ack(it.ID); err != nil {
		t.Fatal(err)
	}
	produceGarbage(t, c.ListenAddrs(), "undecodable-last", 0, 1)
	wait.Within(t, patience, "the member to skip the record that does not decode", func() bool {
		return h.Stats().Undecodable == 1
	})
	m.Close()
	if got := committed(t, c, "undecodable-last", kafkatopic.GroupID("undecodable-last", "g")); got[0] != 2 {
		t.Fatalf("committed %v, want offset 2 on partition 0: past the acked 7 and the record that does not decode", got)
	}
}
