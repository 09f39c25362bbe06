package kafkatopic_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// tooLargeLimit is the max.message.bytes of the topics of these tests, and
// bigSize the size of the value they publish over it.
const (
	tooLargeLimit = 1000
	bigSize       = 5000
)

// limitedTopic creates the one-partition Kafka topic kname with
// max.message.bytes tooLargeLimit on c.
func limitedTopic(t *testing.T, c *kfake.Cluster, kname string) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	limit := strconv.Itoa(tooLargeLimit)
	detail := &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: map[string]*string{"max.message.bytes": &limit}}
	if err := admin.CreateTopic(kname, detail, false); err != nil {
		t.Fatal(err)
	}
}

// batchedOptions are the options of a backend whose producer puts n
// records in one request: it waits for n records (patience at most), so
// that n publishes made at once share a batch.
func batchedOptions(c *kfake.Cluster, n int) kafkatopic.Options[string] {
	o := testOptions[string](c, topic.StringCodec{})
	o.Config.Producer.Flush.Messages = n
	o.Config.Producer.Flush.Frequency = patience
	return o
}

// publishResult is the outcome of one publish of value.
type publishResult struct {
	value string
	err   error
}

// checkTooLarge fails t unless err is the RecordTooLargeError of a record
// of at least bigSize bytes on kname with limit, which wraps both
// ErrRecordTooLarge and sarama.ErrMessageSizeTooLarge and names the size
// (and the limit when known).
func checkTooLarge(t *testing.T, err error, kname string, limit int) {
	t.Helper()
	var tl *kafkatopic.RecordTooLargeError
	if !errors.As(err, &tl) || tl.Topic != kname || tl.Size <= bigSize || tl.Limit != limit {
		t.Fatalf("publish of the %d-byte value = %v, want a *RecordTooLargeError on %q of more than %d bytes with limit %d", bigSize, err, kname, bigSize, limit)
	}
	if !errors.Is(err, kafkatopic.ErrRecordTooLarge) || !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		t.Fatalf("error %v wraps neither ErrRecordTooLarge nor sarama.ErrMessageSizeTooLarge", err)
	}
	want := []string{strconv.Quote(kname), strconv.Itoa(tl.Size) + " bytes", "max.message.bytes"}
	if limit > 0 {
		want = append(want, strconv.Itoa(limit))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not name %s", err, w)
		}
	}
}

// checkStored fails t unless the balanced subscription s receives exactly
// the values small and the topic's log holds nothing else.
func checkStored(t *testing.T, c *kfake.Cluster, kname string, s *topic.Subscription[string], small []string) {
	t.Helper()
	var got []string
	for range small {
		it := recv(t, s)
		if err := s.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
		got = append(got, it.Value)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(small))
	if !slices.Equal(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
	client, err := sarama.NewClient(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if end, err := client.GetOffset(kname, 0, sarama.OffsetNewest); err != nil || end != int64(len(small)) {
		t.Fatalf("the log ends at offset %d (%v), want %d: only the small records are stored", end, err, len(small))
	}
}

// publishAt starts one publish of each value, each from a goroutine of its
// own, reporting to results.
func publishAt(t *testing.T, h *topic.Handle[string], results chan<- publishResult, values ...string) {
	ctx := ctxT(t)
	for _, v := range values {
		go func() { results <- publishResult{v, h.Publish(ctx, v)} }()
	}
}

// oversizedValues returns k small values and one of bigSize bytes.
func oversizedValues(k int) (small []string, big string) {
	for i := range k {
		small = append(small, fmt.Sprintf("small-%d", i))
	}
	return small, strings.Repeat("x", bigSize)
}

// awaitPublishes waits for n results, failing t at once on an error of a
// value other than big, and returns big's error; onBig runs when it
// arrives.
func awaitPublishes(t *testing.T, results <-chan publishResult, n int, big string, onBig func()) error {
	t.Helper()
	var bigErr error
	for pending := n; pending > 0; pending-- {
		var r publishResult
		select {
		case r = <-results:
		case <-time.After(patience):
			t.Fatalf("%d publishes still waiting after %v", pending, patience)
		}
		switch {
		case r.value == big:
			bigErr = r.err
			onBig()
		case r.err != nil:
			t.Fatalf("publish of %q, published with the %d-byte value = %v, want nil", r.value, bigSize, r.err)
		}
	}
	return bigErr
}

// Guarantee: a record larger than the topic's max.message.bytes (read at
// the declaration) fails alone, with a *RecordTooLargeError naming its size
// and the limit, while the records published at the same time, which the
// producer would batch with it, are all stored and received; it is sent in
// a request of its own, so that no batch of several records is refused.
func TestOversizedRecordFailsAloneUnderTheDeclaredLimit(t *testing.T) {
	const kname, k = "limited", 5
	c := testbroker.Kafka(t)
	limitedTopic(t, c, kname)
	var mu sync.Mutex
	var shared []int // records per batch over the limit
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range kreq.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				var batch kmsg.RecordBatch
				if len(rp.Records) > tooLargeLimit && batch.ReadFrom(rp.Records) == nil && batch.NumRecords > 1 {
					mu.Lock()
					shared = append(shared, int(batch.NumRecords))
					mu.Unlock()
				}
			}
		}
		return nil, nil, false
	})
	b := newBackend(t, batchedOptions(c, k+1))
	h := newTopic(t, b, kname, topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))

	small, big := oversizedValues(k)
	results := make(chan publishResult, k+2)
	publishAt(t, h, results, append([]string{big}, small...)...)
	last := fmt.Sprintf("small-%d", k)
	// The producer waits for k+1 records before it sends a request: once
	// the big one has failed, the small ones need one more.
	bigErr := awaitPublishes(t, results, k+2, big, func() { publishAt(t, h, results, last) })
	checkTooLarge(t, bigErr, kname, tooLargeLimit)
	checkStored(t, c, kname, s, append(small, last))
	mu.Lock()
	defer mu.Unlock()
	if len(shared) > 0 {
		t.Fatalf("batches over the limit holding %v records were sent: the record over it shared a batch", shared)
	}
}

// refusedBatch is what publishRefusedBatch leaves: the cluster, the
// subscription, the values published and the error of the big one.
type refusedBatch struct {
	c      *kfake.Cluster
	s      *topic.Subscription[string]
	small  []string
	big    string
	bigErr error
}

// publishRefusedBatch creates kname, limited to tooLargeLimit, on a
// cluster that refuses to describe topic configurations (so the backend
// does not know the limit), with a backend of batchedOptions(c, k+1) as
// edit changes them and a balanced subscription of group "g". It then
// publishes one value of bigSize bytes and k small ones at once, which
// the producer sends in one batch that the broker refuses, and waits for
// the k+1 publishes, failing t if a small one fails.
func publishRefusedBatch(t *testing.T, kname string, k int, edit func(*kafkatopic.Options[string])) refusedBatch {
	t.Helper()
	c := testbroker.Kafka(t)
	limitedTopic(t, c, kname)
	testbroker.RefuseDescribeConfigs(c)
	o := batchedOptions(c, k+1)
	edit(&o)
	b := newBackend(t, o)
	h := newTopic(t, b, topic.Name(kname), topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))

	small, big := oversizedValues(k)
	results := make(chan publishResult, k+1)
	publishAt(t, h, results, append([]string{big}, small...)...)
	bigErr := awaitPublishes(t, results, k+1, big, func() {})
	return refusedBatch{c: c, s: s, small: small, big: big, bigErr: bigErr}
}

// Guarantee: when the topic's max.message.bytes cannot be read (the
// cluster refuses to describe its configuration), the declaration still
// succeeds (logging why), and a record over the limit still fails alone,
// with a *RecordTooLargeError naming its size: the broker refuses its
// batch, and the batch's other records, sent again one by one, are stored
// and received.
func TestOversizedRecordFailsAloneWhenTheLimitIsUnknown(t *testing.T) {
	const kname, k = "unknown-limit", 5
	var logs logBuffer
	rb := publishRefusedBatch(t, kname, k, func(o *kafkatopic.Options[string]) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	checkTooLarge(t, rb.bigErr, kname, 0)
	checkStored(t, rb.c, kname, rb.s, rb.small)
	if !strings.Contains(logs.String(), "max.message.bytes could not be read") {
		t.Fatalf("no log line says the limit could not be read: %q", logs.String())
	}
}

// Guarantee: with a protocol version older than Kafka 0.11, which has no
// request to describe a topic's configuration, the declaration succeeds
// and logs one line saying that the topic's max.message.bytes could not
// be read, and why.
func TestDeclarationBeforeKafka011LogsThatTheLimitIsUnknown(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[string](c, topic.StringCodec{})
	o.Config.Version = sarama.V0_10_2_0
	var logs logBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := newBackend(t, o)
	newTopic(t, b, "old-protocol", topic.Options{})
	var lines []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "max.message.bytes could not be read") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "older than 0.11") || !strings.Contains(lines[0], "old-protocol") {
		t.Fatalf("log lines about the topic's limit: %q, want one naming the topic and the protocol version older than 0.11", lines)
	}
}

// Guarantee: a record exactly as large as the topic's max.message.bytes
// read at the declaration, which the broker refuses because the setting
// was lowered since, fails with a *RecordTooLargeError that claims no
// limit: the limit read is no longer the topic's.
func TestARecordAtTheDeclaredLimitRefusedAfterTheLimitWasLoweredClaimsNoLimit(t *testing.T) {
	c := testbroker.Kafka(t)
	const kname = "lowered"
	limitedTopic(t, c, kname)
	b := newBackend(t, testOptions[string](c, topic.StringCodec{}))
	h := newTopic(t, b, kname, topic.Options{})
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	lower := strconv.Itoa(tooLargeLimit / 2)
	if err := admin.AlterConfig(sarama.TopicResource, kname, map[string]*string{"max.message.bytes": &lower}, false); err != nil {
		t.Fatal(err)
	}
	// 930 bytes of value make a record batch of 1000 bytes: 61 of batch
	// header, 2 of record length, 7 of record fields and value length.
	err = h.Publish(ctxT(t), strings.Repeat("x", tooLargeLimit-70))
	var tl *kafkatopic.RecordTooLargeError
	if !errors.As(err, &tl) || tl.Size != tooLargeLimit {
		t.Fatalf("Publish = %v, want a *RecordTooLargeError of a %d-byte record", err, tooLargeLimit)
	}
	if tl.Limit != 0 || strings.Contains(err.Error(), "at most") {
		t.Fatalf("Publish = %q (limit %d), want no limit claimed: the record does not exceed the one read", err, tl.Limit)
	}
}
