package kafkatopology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: when a partition of a hold topic holds a record batch the
// client cannot decode, the releaser logs it once at ERROR, naming the hold
// topic, the partition and the offset, rather than a WARN line per fetch
// sarama retries; the backend's Stats report the partition as stalled
// (wrapping ErrCorruptBatch) for as long as it cannot go on; and the batch
// is not skipped: the partition stays at its offset.
func TestReleaserReportsAHoldPartitionThatCannotBeDecodedOnceAndInStats(t *testing.T) {
	c := testbroker.Kafka(t)
	logs := &lockedBuffer{}
	b := newLoggedBackend(t, c.ListenAddrs(), logs)
	q := declare(t, b, topology.New("orders").Hold(time.Second))
	hold := q.(*queues[msg]).holds[0].name
	r := subscribe(t, q)
	for n := range 3 {
		if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 3 {
		l := receiveOne(t, r)
		if l.Value.N != n {
			t.Fatalf("received letter %d, want %d", l.Value.N, n)
		}
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
	hits := testbroker.ServeCorruptBatch(c, hold, 0, 3)
	wait.For(t, "the releaser's fetches of the batch that cannot be decoded", func() bool { return hits.Load() >= 10 })

	out := logs.String()
	if n := strings.Count(out, "level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines after %d fetches of the batch, want 1:\n%s", n, hits.Load(), out)
	}
	if n := warnLines(out, "error decoding packet"); n != 0 {
		t.Errorf("%d WARN lines for the batch after %d fetches, want none (one per event):\n%s", n, hits.Load(), out)
	}
	for _, s := range []string{"topic=" + hold, "partition=0", "offset=3"} {
		if !strings.Contains(out, s) {
			t.Errorf("the log does not name %s:\n%s", s, out)
		}
	}
	st := b.Stats()
	if len(st.Stalled) != 1 {
		t.Fatalf("Stats().Stalled = %+v, want the hold partition", st.Stalled)
	}
	s := st.Stalled[0]
	if s.Topic != hold || s.Partition != 0 || s.Offset != 3 || !errors.Is(s.Err, ErrCorruptBatch) || s.Since.IsZero() {
		t.Fatalf("Stats().Stalled[0] = %+v, want topic %q partition 0 offset 3 wrapping ErrCorruptBatch", s, hold)
	}
}

// Guarantee: when a hold topic is deleted while its releaser runs, the
// backend's Stats report it as stalled (its claimed partition, or the
// whole topic once the group sessions fail: an error wrapping
// ErrReleaseStalled and sarama's ErrUnknownTopicOrPartition), and the
// releaser logs it once rather than saying nothing or logging each retry.
func TestReleaserReportsAHoldTopicItCannotConsumeInStatsWithoutALogFlood(t *testing.T) {
	c := testbroker.Kafka(t)
	logs := &lockedBuffer{}
	b := newLoggedBackend(t, c.ListenAddrs(), logs)
	q := declare(t, b, topology.New("orders").Hold(time.Second))
	hold := q.(*queues[msg]).holds[0].name
	releaseOne(t, q, subscribe(t, q))
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic(hold); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the hold topic reported stalled", func() bool {
		st := b.Stats()
		return len(st.Stalled) > 0 && st.Stalled[0].Failures >= 5
	}, func() string { return fmt.Sprintf("Stats() = %+v; log:\n%s", b.Stats(), logs.String()) })
	s := b.Stats().Stalled[0]
	if s.Topic != hold || s.Partition > 0 || !errors.Is(s.Err, ErrReleaseStalled) || !errors.Is(s.Err, sarama.ErrUnknownTopicOrPartition) {
		t.Fatalf("Stats().Stalled[0] = %+v, want topic %q wrapping ErrReleaseStalled and ErrUnknownTopicOrPartition", s, hold)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n > 3 {
		t.Fatalf("%d WARN lines after %d failures, want one per failure kind:\n%s", n, s.Failures, out)
	}
}

// releaseOne holds a letter on q's first hold topic and receives and
// settles it through r once released: the releaser's session runs and
// claims the hold topic's partition.
func releaseOne(t *testing.T, q topology.Queues[msg], r topology.Reader[msg]) {
	t.Helper()
	if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
}

// Guarantee: a held letter that cannot be produced back to its main topic
// (here the topic does not exist) stalls its hold partition at its offset
// in the backend's Stats (an error wrapping ErrReleaseStalled and
// ErrMetadata) and is logged on one WARN line, not one per retry; it is
// not lost: once the topic exists it is released, and the stall ends.
func TestReleaserReportsALetterItCannotReleaseInStatsWithoutALogFlood(t *testing.T) {
	c := testbroker.Kafka(t)
	logs := &lockedBuffer{}
	b := newLoggedBackend(t, c.ListenAddrs(), logs)
	q := declare(t, b, topology.New("orders").Hold(time.Second)).(*queues[msg])
	hold := q.holds[0].name
	l := topology.Letter[msg]{Value: msg{N: 1}}
	if err := q.produce(t.Context(), hold, &l, 0, timeHeader(HeaderDue, time.Now()),
		header(HeaderGroup, q.group), header(HeaderTopic, "gone")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the hold partition reported stalled", func() bool {
		st := b.Stats()
		return len(st.Stalled) == 1 && st.Stalled[0].Failures >= 4
	}, func() string { return fmt.Sprintf("Stats() = %+v; log:\n%s", b.Stats(), logs.String()) })
	s := b.Stats().Stalled[0]
	if s.Topic != hold || s.Partition != 0 || s.Offset != 0 || !errors.Is(s.Err, ErrReleaseStalled) || !errors.Is(s.Err, ErrMetadata) {
		t.Fatalf("Stats().Stalled[0] = %+v, want topic %q partition 0 offset 0 wrapping ErrReleaseStalled and ErrMetadata", s, hold)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d WARN lines after %d failed releases, want 1:\n%s", n, s.Failures, logs.String())
	}
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic("gone", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the stall to end, with one INFO line, once the letter is released", func() bool {
		return len(b.Stats().Stalled) == 0 && strings.Contains(logs.String(), "hold partition released again")
	}, func() string { return fmt.Sprintf("Stats() = %+v; log:\n%s", b.Stats(), logs.String()) })
	offs, err := b.offsets(t.Context(), "gone", []int32{0}, sarama.OffsetNewest)
	if err != nil || offs[0] != 1 {
		t.Fatalf("topic %q ends at %v (%v), want the released letter at offset 0", "gone", offs, err)
	}
}

// Guarantee: a record of a hold topic that this backend did not write (no
// due time, main topic or group) is skipped and committed past by the
// releaser, logged at WARN naming its topic, partition and offset (a
// burst of them in a few lines, the held-back ones counted with their
// first and last offsets, by the releaser's end at the latest), and
// counted in Stats (SkippedHoldRecords); the letters held after them are
// released as usual.
func TestReleaserCountsTheHoldRecordsItSkips(t *testing.T) {
	const foreign = 200
	c := testbroker.Kafka(t)
	var logs logtest.Lines
	b := newLoggedBackend(t, c.ListenAddrs(), &logs)
	q := declare(t, b, topology.New("orders").Hold(time.Second))
	hold := q.(*queues[msg]).holds[0].name
	r := subscribe(t, q)
	for i := range foreign {
		v := `{"N":1}`
		if i == 0 {
			v = "not a letter"
		}
		if err := b.send(&sarama.ProducerMessage{Topic: hold, Partition: 0, Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: 2}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	if l.Value.N != 2 {
		t.Fatalf("received letter %d, want the held letter 2", l.Value.N)
	}
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the releaser to count every record it skips", func() bool { return b.Stats().SkippedHoldRecords >= foreign })
	if n := b.Stats().SkippedHoldRecords; n != foreign {
		t.Fatalf("Stats().SkippedHoldRecords = %d, want %d", n, foreign)
	}
	if lines, _ := logs.Told("level=WARN", "hold record without a valid due time"); lines == 0 || lines > 2 {
		t.Fatalf("%d WARN lines for %d skipped hold records, want 1 or 2 (a burst is held back):\n%s", lines, foreign, strings.Join(logs.All(), ""))
	}
	if n := logs.Count("topic=" + hold); n == 0 {
		t.Fatalf("the log does not name the hold topic %s:\n%s", hold, strings.Join(logs.All(), ""))
	}
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines, told := logs.Told("level=WARN", "hold record without a valid due time")
	if told != foreign || lines > 3 {
		t.Fatalf("after Close, %d WARN lines tell of %d skipped hold records, want at most 3 telling of %d:\n%s",
			lines, told, foreign, strings.Join(logs.All(), ""))
	}
	if logs.Count(logburst.HeldFirstKey+"=1", logburst.HeldLastKey+"=199") != 1 {
		t.Fatalf("no line says where the records held back are (offsets 1 to 199):\n%s", strings.Join(logs.All(), ""))
	}
}

// Guarantee: a held letter larger than its main topic's max.message.bytes
// (the hold topic taking more) stalls its hold partition at its offset,
// not skipped nor dead-lettered: the stall's Err in Stats wraps
// ErrReleaseStalled and a *LetterTooLargeError naming the main topic, the
// record's size and the topic's max.message.bytes, and its one WARN line
// says the letter is larger than its main topic takes, with that error.
// Once the topic's max.message.bytes is raised the letter is released and
// the stall ends.
func TestAHeldLetterTooLargeForItsMainTopicStallsItsHoldPartitionNamingTheSizeAndTheLimit(t *testing.T) {
	const limit = 16 << 10
	logs := &lockedBuffer{}
	b := newLoggedBackend(t, testbroker.Kafka(t).ListenAddrs(), logs)
	q := declare(t, b, topology.New("orders").Hold(time.Second)).(*queues[msg])
	hold := q.holds[0].name
	limitTopic(t, b, q.main, limit)
	big := letterOfSize(t, limit+500)
	if err := q.produce(t.Context(), hold, &big, 0, q.holdHeaders(time.Now())...); err != nil {
		t.Fatalf("holding a %d-byte letter = %v", limit+500, err)
	}

	wait.For(t, "the hold partition reported stalled", func() bool {
		st := b.Stats()
		return len(st.Stalled) == 1 && st.Stalled[0].Failures >= 3
	}, func() string { return fmt.Sprintf("Stats() = %+v; log:\n%s", b.Stats(), logs.String()) })
	s := b.Stats().Stalled[0]
	var tl *LetterTooLargeError
	if s.Topic != hold || s.Partition != 0 || s.Offset != 0 || !errors.Is(s.Err, ErrReleaseStalled) ||
		!errors.As(s.Err, &tl) || tl.Topic != q.main || !tl.Broker || tl.Limit != limit || tl.Size <= limit {
		t.Fatalf("Stats().Stalled[0] = %+v, want topic %q partition 0 offset 0 wrapping ErrReleaseStalled and a *LetterTooLargeError on %q, limit %d",
			s, hold, q.main, limit)
	}
	text := logs.String()
	if n := strings.Count(text, "level=WARN"); n != 1 {
		t.Fatalf("%d WARN lines after %d failed releases, want 1:\n%s", n, s.Failures, text)
	}
	if !strings.Contains(text, "larger than its main topic takes") || !strings.Contains(text, strconv.Itoa(tl.Size)+" bytes") ||
		!strings.Contains(text, "at most "+strconv.Itoa(limit)) {
		t.Fatalf("the stall's WARN line does not say the letter of %d bytes is larger than its main topic takes (%d):\n%s", tl.Size, limit, text)
	}

	limitTopic(t, b, q.main, 1<<20)
	wait.For(t, "the stall to end once the letter is released", func() bool {
		return len(b.Stats().Stalled) == 0 && strings.Contains(logs.String(), "hold partition released again")
	}, func() string { return fmt.Sprintf("Stats() = %+v; log:\n%s", b.Stats(), logs.String()) })
	offs, err := b.offsets(t.Context(), q.main, []int32{0}, sarama.OffsetNewest)
	if err != nil || offs[0] != 1 {
		t.Fatalf("topic %q ends at %v (%v), want the released letter at offset 0", q.main, offs, err)
	}
}
