package pulsar

import (
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/producer"
)

type batchID struct {
	pulsar.MessageID
	size int32
}

func (b batchID) BatchSize() int32 { return b.size }

// Message ids print as Pulsar prints them: ledger:entry:partition, the batch
// index for batched messages, -1 for the partition of an unpartitioned topic.
func TestMessageIDString(t *testing.T) {
	cases := []struct {
		id   pulsar.MessageID
		part int32
		want string
	}{
		{pulsar.NewMessageID(7, 3, 0, 0), -1, "7:3:-1"},
		{pulsar.NewMessageID(7, 3, 0, 2), 2, "7:3:2"},
		{batchID{pulsar.NewMessageID(7, 3, 4, 2), 10}, 2, "7:3:2:4"},
		{batchID{pulsar.NewMessageID(9, 0, 0, 0), 1}, -1, "9:0:-1"},
	}
	for _, tc := range cases {
		md := &Metadata{MessageID: tc.id, Partition: tc.part}
		if got := md.MessageIDString(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if (&Metadata{}).MessageIDString() != "" {
		t.Error("empty metadata prints an id")
	}
}

// Partition topics are split into base topic and index; anything else is
// its own base topic with partition -1.
func TestSplitPartition(t *testing.T) {
	cases := []struct {
		topic, base string
		part        int32
	}{
		{"persistent://public/default/t-partition-3", "persistent://public/default/t", 3},
		{"persistent://public/default/t", "persistent://public/default/t", -1},
		{"persistent://public/default/t-partition-x", "persistent://public/default/t-partition-x", -1},
		{"a-partition-1-partition-12", "a-partition-1", 12},
	}
	for _, tc := range cases {
		base, part := splitPartition(tc.topic)
		if base != tc.base || part != tc.part {
			t.Errorf("%s: got %s %d, want %s %d", tc.topic, base, part, tc.base, tc.part)
		}
	}
}

// The 100/50/50 default (and any even Initial with Threshold = Refill =
// Initial/2) maps exactly onto the client's receiver queue; other windows
// keep Initial as the queue size and are marked inexact.
func TestQueueSizeMapping(t *testing.T) {
	cases := []struct {
		flow  producer.Flow
		size  int
		exact bool
	}{
		{producer.Flow{}.WithDefaults(), 100, true},
		{producer.Flow{Initial: 10, Threshold: 5, Refill: 5}, 10, true},
		{producer.Flow{Initial: 10, Threshold: 3, Refill: 4}, 10, false},
		{producer.Flow{Initial: 11}.WithDefaults(), 11, false},
		{producer.Flow{Initial: 100, Threshold: 50, Refill: 80}, 100, false},
	}
	for _, tc := range cases {
		size, exact := queueSize(tc.flow)
		if size != tc.size || exact != tc.exact {
			t.Errorf("%+v: got %d %t, want %d %t", tc.flow, size, exact, tc.size, tc.exact)
		}
	}
}
