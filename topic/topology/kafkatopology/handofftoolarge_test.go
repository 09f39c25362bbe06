package kafkatopology

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// expectTooLarge fails t unless err is a *LetterTooLargeError on topic
// kname with limit, larger than min, wrapping ErrLetterTooLarge and
// sarama.ErrMessageSizeTooLarge, whose text names the topic and the size
// (and the limit, when known).
func expectTooLarge(t *testing.T, what string, err error, kname string, min, limit int) {
	t.Helper()
	var tl *LetterTooLargeError
	if !errors.As(err, &tl) || tl.Topic != kname || tl.Size <= min || tl.Limit != limit || tl.Reserve != 0 {
		t.Fatalf("%s = %v, want a *LetterTooLargeError on %q of more than %d bytes, limit %d", what, err, kname, min, limit)
	}
	if !errors.Is(err, ErrLetterTooLarge) || !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		t.Fatalf("%s: %v wraps neither ErrLetterTooLarge nor sarama.ErrMessageSizeTooLarge", what, err)
	}
	text := err.Error()
	if !strings.Contains(text, strconv.Quote(kname)) || !strings.Contains(text, strconv.Itoa(tl.Size)) ||
		(limit != 0 && !strings.Contains(text, strconv.Itoa(limit))) {
		t.Fatalf("%s: %q, want it to name topic %q, the size %d and the limit %d", what, text, kname, tl.Size, limit)
	}
}

// Guarantee: a letter on the main topic that fits under the producer's
// largest message (Producer.MaxMessageBytes) only without the headers a
// hold or a dead-lettering adds (a record another producer wrote, which
// Publish's reserve did not check) is neither held nor dead-lettered
// partly: both fail with a *LetterTooLargeError naming the hold topic or
// the DLQ, the record's size and the limit; its record is kept from being
// committed (not lost, not acknowledged unhandled), and is not delivered
// again at once: the reader goes on with the next letter.
func TestALetterTooLargeForItsHoldAndDLQIsKeptNamingTheQueueTheSizeAndTheLimit(t *testing.T) {
	const limit = 16 << 10
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) { o.Config.Producer.MaxMessageBytes = limit })
	q := declare(t, b, topology.New("oversize").Hold(time.Hour).DLQ())
	qs := q.(*queues[msg])
	r := subscribe(t, q)
	dr := subscribeDead(t, q)

	// As another producer would write it: with no reserve for a history.
	big := letterOfSize(t, limit-50)
	if err := qs.produce(t.Context(), qs.main, &big, 0); err != nil {
		t.Fatalf("producing a %d-byte record to the main topic = %v", limit-50, err)
	}
	small := topology.Letter[msg]{Value: msg{Key: "small", N: 2}}
	if err := q.Publish(t.Context(), small); err != nil {
		t.Fatal(err)
	}

	l := receiveOne(t, r)
	if l.Value != big.Value {
		t.Fatalf("received %+v first, want the large letter", l.Value.N)
	}
	now := time.Now()
	l.Retries, l.FirstFailure, l.LastFailure = 1, now, now
	expectTooLarge(t, "Hold", q.Hold(t.Context(), 0, l), qs.holds[0].name, limit, limit)
	l.Death = &topology.Death{Reason: topology.ReasonMaxRetries, Error: "failed", Topic: "oversize", Group: "oversize",
		Retries: 1, FirstFailure: now, LastFailure: now}
	expectTooLarge(t, "DeadLetter", q.DeadLetter(t.Context(), l), qs.dlq, limit, limit)
	if err := r.Settle(t.Context(), &l); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("Settle of the letter whose hand-offs failed = %v, want ErrNotCommitted", err)
	}

	next := receiveOne(t, r)
	if next.Value != small.Value {
		t.Fatalf("received %+v after the large letter, want the small one (N 2)", next.Value.N)
	}
	// Nothing of the large letter reached the DLQ: the first dead letter
	// is the small one.
	next.Death = &topology.Death{Reason: topology.ReasonRejected, Error: "rejected", Topic: "oversize", Group: "oversize"}
	if err := q.DeadLetter(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	if d := receiveOne(t, dr); d.Value != small.Value {
		t.Fatalf("the DLQ's first letter is %+v, want the small one (N 2)", d.Value.N)
	}
}

// limitTopic sets kname's max.message.bytes to limit through b's admin.
func limitTopic(t *testing.T, b *Backend[msg], kname string, limit int) {
	t.Helper()
	v := strconv.Itoa(limit)
	if err := b.admin.AlterConfig(sarama.TopicResource, kname, map[string]*string{"max.message.bytes": &v}, false); err != nil {
		t.Fatalf("setting the max.message.bytes of topic %q: %v", kname, err)
	}
}

// refusedByDLQ declares a topology with a DLQ whose max.message.bytes is
// limit on c, receives a letter of about limit-200 bytes published to its
// main topic and returns the error of its dead-lettering with a Death
// that takes it over the limit, after checking that its record is kept
// from being committed.
func refusedByDLQ(t *testing.T, c *kfake.Cluster, limit int, beforeDeadLetter func()) (*queues[msg], error) {
	t.Helper()
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("broker-oversize").DLQ())
	qs := q.(*queues[msg])
	limitTopic(t, b, qs.dlq, limit)
	r := subscribe(t, q)

	big := letterOfSize(t, limit-200)
	if err := q.Publish(t.Context(), big); err != nil {
		t.Fatalf("Publish of a %d-byte letter = %v", limit-200, err)
	}
	l := receiveOne(t, r)
	now := time.Now()
	l.Death = &topology.Death{Reason: topology.ReasonRejected, Error: strings.Repeat("e", 400), Topic: "broker-oversize",
		Group: "broker-oversize", FirstFailure: now, LastFailure: now}
	beforeDeadLetter()
	err := q.DeadLetter(t.Context(), l)
	if err := r.Settle(t.Context(), &l); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("Settle of the letter whose dead-lettering failed = %v, want ErrNotCommitted", err)
	}
	return qs, err
}

// Guarantee: a letter the main topic took but its DLQ's broker refuses as
// larger than the DLQ's max.message.bytes (the producer's
// Producer.MaxMessageBytes being larger) fails its dead-lettering with a
// *LetterTooLargeError naming the DLQ, the record's size and the DLQ's
// max.message.bytes, read from the cluster at the refusal, and its record
// is kept from being committed, not lost.
func TestALetterTheBrokerRefusesForItsDLQIsKeptNamingTheQueueTheSizeAndTheLimit(t *testing.T) {
	const limit = 16 << 10
	qs, err := refusedByDLQ(t, testbroker.Kafka(t), limit, func() {})
	expectTooLarge(t, "DeadLetter", err, qs.dlq, limit-200, limit)
	if tl := (*LetterTooLargeError)(nil); !errors.As(err, &tl) || !tl.Broker || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("DeadLetter = %v, want a refusal by the broker naming max.message.bytes", err)
	}
}

// Guarantee: when the broker refuses a dead-lettering as too large and
// the DLQ's max.message.bytes cannot be read (the cluster refuses to
// describe it), the *LetterTooLargeError has Limit 0 and says that the
// limit is unknown.
func TestABrokerRefusalWhoseLimitCannotBeReadSaysTheLimitIsUnknown(t *testing.T) {
	const limit = 16 << 10
	c := testbroker.Kafka(t)
	qs, err := refusedByDLQ(t, c, limit, func() { testbroker.RefuseDescribeConfigs(c) })
	expectTooLarge(t, "DeadLetter", err, qs.dlq, limit-200, 0)
	if tl := (*LetterTooLargeError)(nil); !errors.As(err, &tl) || !tl.Broker || !strings.Contains(err.Error(), "max.message.bytes, whose value is unknown") {
		t.Fatalf("DeadLetter = %v, want a refusal by the broker saying the topic's max.message.bytes is unknown", err)
	}
}

// Guarantee: dead-letterings made at the same time to a DLQ whose
// max.message.bytes is below the producer's Producer.MaxMessageBytes,
// each fitting the DLQ alone but together over it, all succeed: the
// producer puts them in one record batch, which the broker refuses as too
// large, and each is then sent again on its own. Each is in the DLQ once.
func TestHandOffsBatchedOverTheTopicLimitEachReachTheirTopicAlone(t *testing.T) {
	const limit, n = 16 << 10, 3
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) {
		// The producer sends the dead-letterings in one record batch.
		o.Config.Producer.Flush.Messages = n
		o.Config.Producer.Flush.Frequency = time.Minute
	})
	q := declare(t, b, topology.New("batched").DLQ())
	qs := q.(*queues[msg])
	limitTopic(t, b, qs.dlq, limit)

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		l := letterOfSize(t, limit*2/3)
		l.Value.N = i + 1
		l.Death = &topology.Death{Reason: topology.ReasonRejected, Error: "rejected", Topic: "batched", Group: "batched"}
		wg.Go(func() { errs[i] = q.DeadLetter(t.Context(), l) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("DeadLetter of letter %d = %v, want nil: it fits the DLQ alone", i+1, err)
		}
	}
	if end, err := b.client.GetOffset(qs.dlq, 0, sarama.OffsetNewest); err != nil || end != n {
		t.Fatalf("the DLQ's log end = %d (%v), want %d", end, err, n)
	}
}

// Guarantee: Declare logs one WARN for each of the topology's topics (its
// main topic, hold topics and DLQ) whose max.message.bytes is below
// Producer.MaxMessageBytes, naming the topic, its limit and the
// producer's, and goes on; it logs none for a topic at or above it (the
// brokers' default included).
func TestDeclareWarnsOfEachTopicWhoseLimitIsBelowTheProducers(t *testing.T) {
	var lines logtest.Lines
	b := newLoggedBackend(t, testbroker.Kafka(t).ListenAddrs(), &lines)
	tb := topology.New("limited").Hold(time.Hour).Hold(2 * time.Hour).DLQ()
	qs := declare(t, b, tb).(*queues[msg])
	producer := b.cfg.Producer.MaxMessageBytes
	if n := lines.Count(msgLimitBelowProducer); n != 0 {
		t.Fatalf("%d WARN %q over topics at the brokers' default limit, want none:\n%s", n, msgLimitBelowProducer, lines.All())
	}
	below := map[string]int{qs.main: 16 << 10, qs.holds[1].name: producer - 1, qs.dlq: producer / 2}
	limitTopic(t, b, qs.holds[0].name, producer)
	for kname, limit := range below {
		limitTopic(t, b, kname, limit)
	}
	declare(t, b, tb)
	if n := lines.Count(msgLimitBelowProducer); n != len(below) {
		t.Errorf("%d WARN %q, want %d, one per topic below the producer's limit:\n%s", n, msgLimitBelowProducer, len(below), lines.All())
	}
	for kname, limit := range below {
		lines.Want(t, 1, "the WARN of topic "+kname, "level=WARN", msgLimitBelowProducer, "topic="+kname+" ",
			"maxMessageBytes="+strconv.Itoa(limit)+" ", "producerMaxMessageBytes="+strconv.Itoa(producer))
	}
	if n := lines.Count(msgLimitBelowProducer, "topic="+qs.holds[0].name+" "); n != 0 {
		t.Errorf("%d WARN %q for hold topic %q, whose limit takes what the producer sends", n, msgLimitBelowProducer, qs.holds[0].name)
	}
}
