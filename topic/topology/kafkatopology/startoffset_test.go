package kafkatopology

import (
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// existingTopic makes topic kname on c with parts partitions holding the
// letters 1 to n before any topology is declared on it: letter v on
// partition v%parts (see testbroker.ExistingTopic).
func existingTopic(t *testing.T, c *kfake.Cluster, kname string, parts int32, n int) {
	t.Helper()
	testbroker.ExistingTopic(t, c, kname, parts, n, func(v int) ([]byte, error) { return topic.JSONCodec[msg]{}.Encode(msg{N: v}) })
}

// startingAt sets Options.InitialOffset.
func startingAt(initial string) func(*Options[msg]) {
	return func(o *Options[msg]) { o.InitialOffset = initial }
}

// startLines returns the lines of logs about where a new group starts.
func startLines(logs string) []string {
	return testbroker.LinesWith(logs, msgStartAtEnd, msgStartAtOldest)
}

// committedOffset is group gid's committed offset on partition part of
// kname (-1 for none, or when the cluster has never seen the group).
func committedOffset(t *testing.T, brokers []string, kname, gid string, part int32) int64 {
	t.Helper()
	resp, err := testbroker.Admin(t, brokers).ListConsumerGroupOffsets(gid, map[string][]int32{kname: {part}})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	if blk := resp.GetBlock(kname, part); blk != nil {
		return blk.Offset
	}
	return -1
}

// Guarantee: by default a consumer group declared on a topic that already
// holds records starts after them, at the log end as of its first
// Declare: they are not delivered to it, and Declare says so in one INFO
// line naming the topic, the group, how many records precede the group's
// start (summed over the partitions) and the option that delivers them. A
// group declared on an empty topic logs no such line.
func TestByDefaultANewGroupSkipsTheRecordsAlreadyThereAndSaysHowMany(t *testing.T) {
	c := testbroker.Kafka(t)
	existingTopic(t, c, "orders", 2, 100)
	var logs lockedBuffer
	b := newLoggedBackend(t, c.ListenAddrs(), &logs)
	q := declare(t, b, topology.New("orders"))
	declare(t, b, topology.New("fresh"))
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 101}}); err != nil {
		t.Fatal(err)
	}
	// Both partitions hold 50 records before 101: a group started at the
	// oldest record would receive one of them first.
	if got := receiveOne(t, subscribe(t, q)); got.Value.N != 101 {
		t.Errorf("the group received letter %d first, want 101, the first published after its Declare", got.Value.N)
	}
	want := `level=INFO msg="` + msgStartAtEnd + `" topic=orders group=orders:orders records=100`
	if lines := startLines(logs.String()); len(lines) != 1 || !strings.HasSuffix(lines[0], want) {
		t.Errorf("lines about new groups:\n%s\nwant one ending %s", strings.Join(lines, "\n"), want)
	}
}

// Guarantee: with InitialOffset earliest a consumer group declared on a
// topic that already holds records is delivered every one of them, once
// each, in order on each partition, then what is published after; Declare
// says in one INFO line how many records it delivers.
func TestInitialOffsetEarliestDeliversTheRecordsAlreadyThereOnceInOrder(t *testing.T) {
	c := testbroker.Kafka(t)
	existingTopic(t, c, "orders", 2, 100)
	var logs lockedBuffer
	b := newLoggedBackend(t, c.ListenAddrs(), &logs, startingAt(kafka.OffsetEarliest))
	q := declare(t, b, topology.New("orders"))
	for part := range int32(2) {
		if got := committedOffset(t, c.ListenAddrs(), "orders", "orders:orders", part); got != 0 {
			t.Fatalf("Declare started the group at offset %d of partition %d, want 0, the oldest record", got, part)
		}
	}
	r := subscribe(t, q)
	seen := map[int]int{}
	last := map[int32]int{}
	for range 100 {
		l := receiveOne(t, r)
		part := l.Receipt.(*receipt).c.part
		if l.Value.N <= last[part] {
			t.Errorf("partition %d delivered letter %d after %d", part, l.Value.N, last[part])
		}
		last[part] = l.Value.N
		seen[l.Value.N]++
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
	for v := 1; v <= 100; v++ {
		if seen[v] != 1 {
			t.Errorf("letter %d delivered %d times, want once", v, seen[v])
		}
	}
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 101}}); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, r); got.Value.N != 101 {
		t.Errorf("after the 100 records the group received letter %d, want 101", got.Value.N)
	}
	want := `level=INFO msg="` + msgStartAtOldest + `" topic=orders group=orders:orders records=100`
	if lines := startLines(logs.String()); len(lines) != 1 || !strings.HasSuffix(lines[0], want) {
		t.Errorf("lines about new groups:\n%s\nwant one ending %s", strings.Join(lines, "\n"), want)
	}
}

// Guarantee: declaring a topology again, on the same backend or on another,
// never moves its group's committed offsets, whatever either backend's
// InitialOffset: a group started at the oldest record is not moved to the
// log end by a backend with the default, nor one started at the log end
// back to the oldest record by a backend with InitialOffset earliest; and
// such a declaration logs nothing about where the group starts.
func TestDeclaringAgainNeverMovesACommittedOffset(t *testing.T) {
	for _, tc := range []struct {
		first, then string
		start       int64 // where the first declaration starts the group
	}{
		{first: kafka.OffsetEarliest, then: kafka.OffsetLatest, start: 0},
		{first: kafka.OffsetLatest, then: kafka.OffsetEarliest, start: 10},
	} {
		t.Run(tc.first+" then "+tc.then, func(t *testing.T) {
			c := testbroker.Kafka(t)
			brokers := c.ListenAddrs()
			existingTopic(t, c, "orders", 1, 10)
			var firstLogs lockedBuffer
			b1 := newLoggedBackend(t, brokers, &firstLogs, startingAt(tc.first))
			declare(t, b1, topology.New("orders"))
			if got := committedOffset(t, brokers, "orders", "orders:orders", 0); got != tc.start {
				t.Fatalf("the first declaration committed offset %d, want %d", got, tc.start)
			}
			var logs lockedBuffer
			declare(t, newLoggedBackend(t, brokers, &logs, startingAt(tc.first)), topology.New("orders"))
			b2 := newLoggedBackend(t, brokers, &logs, startingAt(tc.then))
			q2 := declare(t, b2, topology.New("orders"))
			declare(t, b2, topology.New("orders"))
			if got := committedOffset(t, brokers, "orders", "orders:orders", 0); got != tc.start {
				t.Errorf("declaring again moved the committed offset from %d to %d", tc.start, got)
			}
			if lines := startLines(logs.String()); len(lines) != 0 {
				t.Errorf("declaring again logged about where the group starts:\n%s", strings.Join(lines, "\n"))
			}
			if err := q2.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 11}}); err != nil {
				t.Fatal(err)
			}
			if got := receiveOne(t, subscribe(t, q2)); int64(got.Value.N) != tc.start+1 {
				t.Errorf("the group received letter %d first, want %d", got.Value.N, tc.start+1)
			}
		})
	}
}

// Guarantee: when the commit of a new group's starting offsets is refused
// (members elsewhere joined the group first), Declare still succeeds, logs
// one WARN and no line about a start it did not make, and the group's
// partitions without a committed offset start at the oldest record,
// whatever InitialOffset: nothing the topic holds is missed.
func TestARefusedStartBeginsAtTheOldestRecord(t *testing.T) {
	for _, initial := range []string{kafka.OffsetLatest, kafka.OffsetEarliest} {
		t.Run(initial, func(t *testing.T) {
			c := testbroker.Kafka(t)
			brokers := c.ListenAddrs()
			existingTopic(t, c, "orders", 1, 3)
			starts := testbroker.Inject(c, kmsg.OffsetCommit, kerr.UnknownMemberID.Code, func(req kmsg.Request) bool {
				r := req.(*kmsg.OffsetCommitRequest)
				return r.Group == "orders:orders" && r.Generation == -1
			})
			starts.Every(1)
			var logs lockedBuffer
			b := newLoggedBackend(t, brokers, &logs, startingAt(initial))
			q := declare(t, b, topology.New("orders"))
			starts.Every(0)
			if starts.Failed() == 0 {
				t.Fatal("no starting offset was refused: the test checks nothing")
			}
			if got := committedOffset(t, brokers, "orders", "orders:orders", 0); got != -1 {
				t.Fatalf("committed offset %d after the refusal, want none", got)
			}
			if n := strings.Count(logs.String(), "level=WARN msg=\"kafkatopology: the starting offsets of a consumer group were refused"); n != 1 {
				t.Errorf("%d WARN lines about the refusal, want 1:\n%s", n, logs.String())
			}
			if lines := startLines(logs.String()); len(lines) != 0 {
				t.Errorf("a refused start logged where the group starts:\n%s", strings.Join(lines, "\n"))
			}
			if got := receiveOne(t, subscribe(t, q)); got.Value.N != 1 {
				t.Errorf("the group received letter %d first, want 1, the oldest record", got.Value.N)
			}
		})
	}
}

// Guarantee: an InitialOffset other than earliest or latest is refused,
// naming the field and the rule.
func TestInitialOffsetIsValidated(t *testing.T) {
	o := Options[msg]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.JSONCodec[msg]{}, InitialOffset: kafka.OffsetTimestamp}
	err := o.WithDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "kafkatopology.initialOffset must be one of [earliest latest]") {
		t.Errorf("Validate with InitialOffset %q = %v, want kafkatopology.initialOffset must be one of [earliest latest]", o.InitialOffset, err)
	}
	o.InitialOffset = ""
	if got := o.WithDefaults().InitialOffset; got != kafka.OffsetLatest {
		t.Errorf("default InitialOffset %q, want %q", got, kafka.OffsetLatest)
	}
	if err := o.WithDefaults().Validate(); err != nil {
		t.Errorf("Validate with the default InitialOffset: %v", err)
	}
}
