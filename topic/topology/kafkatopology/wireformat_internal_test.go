package kafkatopology

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The wire format of a letter's record is what a later version reads from
// hold topics and DLQs written by this one: header names, their values'
// formats, key and value bytes. The tests below write the names and values
// as literals, so that a change to any of them fails here; such a change
// needs a release that reads both formats first (docs/topology.md).

// oneTopicClient is a client whose metadata knows one partition of every
// topic, so that a record can be built without a broker.
type oneTopicClient struct{ sarama.Client }

func (oneTopicClient) PartitionNotReadable(string, int32) bool { return false }
func (oneTopicClient) Partitions(string) ([]int32, error)      { return []int32{0}, nil }

// wireHeaders is the record of topologytest.WireLetter held in hold topic
// orders.hold.1 for group billing, due at 2026-03-01T12:07:00.000000001Z,
// as this version writes it, header for header.
var wireHeaders = [][2]string{
	{"topology-shard", "3"},
	{"topology-retries", "2"},
	{"topology-first-failure", "2026-03-01T12:04:05.123456789Z"},
	{"topology-last-failure", "2026-03-01T12:06:00.5Z"},
	{"topology-resume", "1"},
	{"topology-death-reason", "max_retries"},
	{"topology-death-error", "boom"},
	{"topology-death-topic", "orders"},
	{"topology-death-group", "billing"},
	{"topology-death-retries", "2"},
	{"topology-death-first-failure", "2026-03-01T12:04:05.123456789Z"},
	{"topology-death-last-failure", "2026-03-01T12:06:00Z"},
	{"topology-due", "2026-03-01T12:07:00.000000001Z"},
	{"topology-group", "billing"},
	{"topology-topic", "orders"},
}

const (
	wireKey   = "customer-42"
	wireValue = `{"key":"A","n":7}`
)

func wireQueues(t *testing.T) *queues[topologytest.Msg] {
	t.Helper()
	top, err := topology.New("orders").ForConsumerGroup("billing").Hold(time.Minute).Build()
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend[topologytest.Msg]{opts: Options[topologytest.Msg]{Codec: topic.JSONCodec[topologytest.Msg]{}}, cfg: sarama.NewConfig(), client: oneTopicClient{}}
	return &queues[topologytest.Msg]{b: b, t: top, main: "orders", group: "billing"}
}

// Guarantee: a held dead letter's record carries its key and JSON value
// as they are, and its history, due time, group and main topic in headers
// of fixed names, times in UTC RFC 3339 with nanoseconds (trailing zeros
// cut), counts in decimal, Resume as "1".
func TestAHeldLettersRecordKeepsItsWireFormat(t *testing.T) {
	q := wireQueues(t)
	l := topologytest.WireLetter()
	due := time.Date(2026, 3, 1, 13, 7, 0, 1, time.FixedZone("CET", 3600))
	msg, err := q.record(t.Context(), "orders.hold.1", &l, 0, q.holdHeaders(due)...)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]string
	for _, h := range msg.Headers {
		got = append(got, [2]string{string(h.Key), string(h.Value)})
	}
	for i := range max(len(got), len(wireHeaders)) {
		var g, w [2]string
		if i < len(got) {
			g = got[i]
		}
		if i < len(wireHeaders) {
			w = wireHeaders[i]
		}
		if g != w {
			t.Errorf("header %d = %q, want %q", i, g, w)
		}
	}
	if k, _ := msg.Key.Encode(); string(k) != wireKey {
		t.Errorf("key = %q, want %q", k, wireKey)
	}
	if v, _ := msg.Value.Encode(); string(v) != wireValue {
		t.Errorf("value = %q, want %q", v, wireValue)
	}
}

// Guarantee: a fresh letter's record carries no history header at all,
// and one without a key no key.
func TestAFreshLettersRecordCarriesNoHeaders(t *testing.T) {
	q := wireQueues(t)
	msg, err := q.record(t.Context(), "orders", &topology.Letter[topologytest.Msg]{Value: topologytest.Msg{Key: "A", N: 7}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Headers) != 0 || msg.Key != nil {
		t.Errorf("headers %v, key %v; want none", msg.Headers, msg.Key)
	}
}

// Guarantee: a record as this version writes it to a hold topic or DLQ
// decodes into the letter it was written from, with its due time, group
// and main topic.
func TestARecordWrittenByThisVersionDecodesIntoItsLetter(t *testing.T) {
	rec := &sarama.ConsumerMessage{Topic: "orders.hold.1", Key: []byte(wireKey), Value: []byte(wireValue)}
	for _, h := range wireHeaders {
		rec.Headers = append(rec.Headers, &sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
	}
	b := wireQueues(t).b
	l, m, err := decodeLetter(b, rec)
	if err != nil {
		t.Fatal(err)
	}
	topologytest.CheckWireLetter(t, l, true)
	if due := time.Date(2026, 3, 1, 12, 7, 0, 1, time.UTC); !m.due.Equal(due) {
		t.Errorf("due = %v, want %v", m.due, due)
	}
	if m.group != "billing" || m.topic != "orders" {
		t.Errorf("group %q, topic %q; want billing and orders", m.group, m.topic)
	}
}
