package kafkatopic_test

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/validate"
)

// existingTopic makes topic kname on c with parts partitions holding the
// values 1 to n before any backend declares it: value v on partition
// v%parts (see testbroker.ExistingTopic).
func existingTopic(t *testing.T, c *kfake.Cluster, kname string, parts int32, n int) {
	t.Helper()
	testbroker.ExistingTopic(t, c, kname, parts, n, topic.IntCodec{}.Encode)
}

// loggedOptions are testOptions logging as text to logs, starting new
// groups at initial.
func loggedOptions(c *kfake.Cluster, logs *logBuffer, initial string) kafkatopic.Options[int] {
	o := testOptions[int](c, topic.IntCodec{})
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	o.InitialOffset = initial
	return o
}

// startLines returns the lines of logs about where a new group starts.
func startLines(logs string) []string {
	return testbroker.LinesWith(logs, kafkatopic.MsgStartAtEnd, kafkatopic.MsgStartAtOldest)
}

// wantOneStartLine checks that logs hold one line about where a new group
// starts, msg, for group billing of topic orders and the given records.
func wantOneStartLine(t *testing.T, logs, msg string, records int) {
	t.Helper()
	want := `level=INFO msg="` + msg + `" topic=orders group=orders:billing records=` + strconv.Itoa(records)
	if lines := startLines(logs); len(lines) != 1 || !strings.HasSuffix(lines[0], want) {
		t.Errorf("lines about new groups:\n%s\nwant one ending %s", strings.Join(lines, "\n"), want)
	}
}

// publishedNext publishes v on h and returns the value s receives next.
func publishedNext(t *testing.T, h *topic.Handle[int], s *topic.Subscription[int], v int) int {
	t.Helper()
	if err := h.Publish(ctxT(t), v); err != nil {
		t.Fatal(err)
	}
	return recv(t, s).Value
}

// committed is group gid's committed offset on each partition of kname.
func committed(t *testing.T, c *kfake.Cluster, kname, gid string) map[int32]int64 {
	t.Helper()
	return testbroker.Committed(t, testbroker.Admin(t, c.ListenAddrs()), kname, gid)
}

// Guarantee: by default a balanced group subscribed to a topic that
// already holds records starts after them, at the log end as of its first
// Subscribe: they are not delivered to it, and Subscribe says so in one
// INFO line naming the Kafka topic, the group, how many records precede
// the group's start (summed over the partitions) and the option that
// delivers them. A group started on an empty topic logs no such line.
func TestByDefaultANewGroupSkipsTheRecordsAlreadyThereAndSaysHowMany(t *testing.T) {
	c := testbroker.Kafka(t)
	existingTopic(t, c, "orders", 2, 100)
	var logs logBuffer
	b := newBackend(t, loggedOptions(c, &logs, ""))
	h := newTopic(t, b, "orders", topic.Options{})
	subscribe(t, newTopic(t, b, "fresh", topic.Options{}), topic.Balanced("billing"))
	s := subscribe(t, h, topic.Balanced("billing"))
	// Both partitions hold 50 records before 101: a group started at the
	// oldest record would receive one of them first.
	if got := publishedNext(t, h, s, 101); got != 101 {
		t.Errorf("the group received %d first, want 101, the first published after its Subscribe", got)
	}
	wantOneStartLine(t, logs.String(), kafkatopic.MsgStartAtEnd, 100)
}

// Guarantee: with InitialOffset earliest a balanced group subscribed to a
// topic that already holds records is delivered every one of them, once
// each, in order on each partition, then what is published after; its
// first Subscribe says in one INFO line how many records it delivers.
func TestInitialOffsetEarliestDeliversTheRecordsAlreadyThereOnceInOrder(t *testing.T) {
	c := testbroker.Kafka(t)
	existingTopic(t, c, "orders", 2, 100)
	var logs logBuffer
	b := newBackend(t, loggedOptions(c, &logs, kafka.OffsetEarliest))
	h := newTopic(t, b, "orders", topic.Options{})
	s := subscribe(t, h, topic.Balanced("billing"))
	for part, off := range committed(t, c, "orders", "orders:billing") {
		if off != 0 {
			t.Fatalf("Subscribe started the group at offset %d of partition %d, want 0, the oldest record", off, part)
		}
	}
	seen := map[int]int{}
	last := map[int]int{}
	for range 100 {
		it := recv(t, s)
		part := it.Value % 2
		if it.Value <= last[part] {
			t.Errorf("partition %d delivered %d after %d", part, it.Value, last[part])
		}
		last[part] = it.Value
		seen[it.Value]++
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
	}
	for v := 1; v <= 100; v++ {
		if seen[v] != 1 {
			t.Errorf("%d delivered %d times, want once", v, seen[v])
		}
	}
	if got := publishedNext(t, h, s, 101); got != 101 {
		t.Errorf("after the 100 records the group received %d, want 101", got)
	}
	wantOneStartLine(t, logs.String(), kafkatopic.MsgStartAtOldest, 100)
}

// Guarantee: subscribing a group again, on the same backend or on
// another, never moves its committed offsets, whatever either backend's
// InitialOffset: a group started at the oldest record is not moved to the
// log end by a backend with the default, nor one started at the log end
// back to the oldest record by a backend with InitialOffset earliest; and
// such a Subscribe logs nothing about where the group starts.
func TestSubscribingAgainNeverMovesACommittedOffset(t *testing.T) {
	for _, tc := range []struct {
		first, then string
		start       int64 // where the first Subscribe starts the group
	}{
		{first: kafka.OffsetEarliest, then: kafka.OffsetLatest, start: 0},
		{first: kafka.OffsetLatest, then: kafka.OffsetEarliest, start: 10},
	} {
		t.Run(tc.first+" then "+tc.then, func(t *testing.T) {
			c := testbroker.Kafka(t)
			existingTopic(t, c, "orders", 1, 10)
			var firstLogs logBuffer
			b1 := newBackend(t, loggedOptions(c, &firstLogs, tc.first))
			h1 := newTopic(t, b1, "orders", topic.Options{})
			subscribe(t, h1, topic.Balanced("billing")).Close()
			if got := committed(t, c, "orders", "orders:billing")[0]; got != tc.start {
				t.Fatalf("the first Subscribe committed offset %d, want %d", got, tc.start)
			}
			var logs logBuffer
			b2 := newBackend(t, loggedOptions(c, &logs, tc.then))
			h2 := newTopic(t, b2, "orders", topic.Options{})
			subscribe(t, h1, topic.Balanced("billing")).Close()
			s := subscribe(t, h2, topic.Balanced("billing"))
			if got := committed(t, c, "orders", "orders:billing")[0]; got != tc.start {
				t.Errorf("subscribing again moved the committed offset from %d to %d", tc.start, got)
			}
			if lines := startLines(firstLogs.String() + logs.String()); len(lines) != 1 {
				t.Errorf("lines about new groups:\n%s\nwant only the first Subscribe's", strings.Join(lines, "\n"))
			}
			if got := publishedNext(t, h2, s, 11); int64(got) != tc.start+1 {
				t.Errorf("the group received %d first, want %d", got, tc.start+1)
			}
		})
	}
}

// Guarantee: an InitialOffset other than earliest or latest is refused,
// naming the field and the rule; the default is latest.
func TestInitialOffsetIsValidated(t *testing.T) {
	o := kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}, InitialOffset: kafka.OffsetTimestamp}
	err := o.Validate()
	var ve validate.Errors
	if !errors.As(err, &ve) || !ve.Has("initial_offset", "oneof") || !strings.Contains(err.Error(), "initial_offset must be one of [earliest latest]") {
		t.Errorf("Validate with InitialOffset %q = %v, want initial_offset must be one of [earliest latest]", o.InitialOffset, err)
	}
	o.InitialOffset = ""
	if err := o.Validate(); err != nil {
		t.Errorf("Validate with no InitialOffset: %v", err)
	}
	if got := o.WithDefaults().InitialOffset; got != kafka.OffsetLatest {
		t.Errorf("default InitialOffset %q, want %q", got, kafka.OffsetLatest)
	}
}

// Guarantee: a group whose committed offset retention has since deleted
// continues from the oldest record kept, not from the log end: the
// records still there are delivered.
func TestAGroupBelowTheLogStartContinuesFromTheOldestRecordKept(t *testing.T) {
	c := testbroker.Kafka(t)
	existingTopic(t, c, "orders", 1, 10) // values 1 to 10 at offsets 0 to 9
	var logs logBuffer
	b := newBackend(t, loggedOptions(c, &logs, kafka.OffsetEarliest))
	h := newTopic(t, b, "orders", topic.Options{})
	subscribe(t, h, topic.Balanced("billing")).Close()
	if got := committed(t, c, "orders", "orders:billing")[0]; got != 0 {
		t.Fatalf("the first Subscribe committed offset %d, want 0", got)
	}
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteRecords("orders", map[int32]int64{0: 5}); err != nil {
		t.Fatal(err)
	}
	s := subscribe(t, h, topic.Balanced("billing"))
	if got := publishedNext(t, h, s, 11); got != 6 {
		t.Fatalf("the group received %d first, want 6, the oldest value kept", got)
	}
}
