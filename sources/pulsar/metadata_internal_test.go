package pulsar

import (
	"strconv"
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

// The queue plan leaves the source room to take a message whenever the feed
// refills and when it starts, never lets the client's queues (the reserve)
// take more than half the window or the part above Threshold, and counts
// every partition's queue while they fit that budget.
func TestQueuePlanLeavesRoomAtEveryRefill(t *testing.T) {
	for initial := 2; initial <= 40; initial++ {
		for threshold := 0; threshold < initial; threshold++ {
			for _, refill := range []int{1, 2, initial / 2, initial, 3 * initial} {
				f := producer.Flow{Initial: initial, Threshold: threshold, Refill: max(refill, 1)}
				w := f.MaxWindow()
				for parts := 1; parts <= 9; parts++ {
					p := newQueuePlan(f, parts)
					share := min(max(0, w-threshold-1), max(1, w/2))
					// With no budget above Threshold the queue of 1 is still
					// counted (the window holds); no room at a refill then.
					atRefill := 1
					if share == 0 {
						share, atRefill = 1, 0
					}
					switch {
					case p.size < 1:
						t.Fatalf("%+v, %d partitions: queue size %d", f, parts, p.size)
					case p.room(0) < 1 || p.room(threshold) < atRefill:
						t.Fatalf("%+v, %d partitions: no room at the start (%d) or at a refill (%d)", f, parts, p.room(0), p.room(threshold))
					case p.reserve > share:
						t.Fatalf("%+v, %d partitions: reserve %d above the share %d (half the window, at most the part above Threshold)", f, parts, p.reserve, share)
					case parts*p.size <= share && p.reserve != parts*p.size:
						t.Fatalf("%+v, %d partitions: reserve %d does not count %d queues of %d", f, parts, p.reserve, parts, p.size)
					}
				}
			}
		}
	}
	// The default window: one queue of 49 (the part above Threshold, less
	// one), the stage holding the rest.
	if p := newQueuePlan(producer.Flow{}.WithDefaults(), 1); p.size != 49 || p.reserve != 49 || p.room(0) != 51 {
		t.Errorf("default window: %+v, room %d", p, p.room(0))
	}
}

// Guarantee: for any topic name the client reports, splitPartition never
// panics, and it reports a partition only for a name that is exactly its
// base topic, "-partition-" and the partition index as Pulsar writes it (a
// decimal from 0 to the largest int32, without sign or leading zero);
// any other name is its own base topic with partition -1.
func FuzzSplitPartition(f *testing.F) {
	for _, topic := range []string{
		"persistent://public/default/t-partition-3", "persistent://public/default/t", "t-partition-", "-partition-0",
		"t-partition-x", "a-partition-1-partition-12", "t-partition-2147483647", "t-partition-2147483648",
		"t-partition--1", "t-partition-+3", "t-partition-03", "t-partition-0", "t-partition-3 ", "\xff-partition-1", "",
	} {
		f.Add(topic)
	}
	f.Fuzz(func(t *testing.T, topic string) {
		base, part := splitPartition(topic)
		switch {
		case part < -1:
			t.Fatalf("%q: partition %d", topic, part)
		case part == -1 && base != topic:
			t.Fatalf("%q: no partition, base %q", topic, base)
		case part >= 0 && base+partitionSuffix+strconv.Itoa(int(part)) != topic:
			t.Fatalf("%q: split as %q and partition %d", topic, base, part)
		}
	})
}
