package kafkatopic

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
)

// The wire format of an envelope's record is what a later version, or
// another program, reads from the topic: value bytes by the codec, key,
// timestamp and headers. The tests below write them as literals, so that
// a change fails here; such a change needs a release that reads both
// formats first (docs/topic-backends.md).

type wireOrder struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// Guarantee: an envelope's record carries the codec's bytes as its value,
// Options.Key's bytes as its key, Options.EventTime as its timestamp, and
// as headers those of Options.Headers first and then one per envelope
// header, its key and value as they are; nothing else.
func TestAnEnvelopesRecordKeepsItsWireFormat(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 4, 5, 123000000, time.UTC)
	tp := &kTopic[wireOrder]{kname: "orders", b: &Backend[wireOrder]{opts: Options[wireOrder]{
		Codec:     topic.JSONCodec[wireOrder]{},
		Key:       func(o wireOrder) []byte { return []byte(o.ID) },
		EventTime: func(wireOrder) time.Time { return at },
		Headers: func(wireOrder) []sarama.RecordHeader {
			return []sarama.RecordHeader{{Key: []byte("source"), Value: []byte("shop")}}
		},
	}}}
	var c completion
	e := topic.Envelope[wireOrder]{Value: wireOrder{"a-1", 250}, Headers: topic.Headers{"trace-id": "abc", "tenant": "t1"}}
	if err := tp.encode(&c, e); err != nil {
		t.Fatal(err)
	}
	value, _ := c.msg.Value.Encode()
	key, _ := c.msg.Key.Encode()
	if c.msg.Topic != "orders" || string(value) != `{"id":"a-1","cents":250}` || string(key) != "a-1" || !c.msg.Timestamp.Equal(at) {
		t.Errorf("topic %q, value %q, key %q, timestamp %v; want orders, %q, a-1, %v",
			c.msg.Topic, value, key, c.msg.Timestamp, `{"id":"a-1","cents":250}`, at)
	}
	var hs []string
	for _, h := range c.msg.Headers {
		hs = append(hs, string(h.Key)+"="+string(h.Value))
	}
	// The envelope's headers come after the options' in no fixed order.
	if len(hs) == 0 || hs[0] != "source=shop" {
		t.Errorf("headers %q, want source=shop first", hs)
	}
	if slices.Sort(hs); !slices.Equal(hs, []string{"source=shop", "tenant=t1", "trace-id=abc"}) {
		t.Errorf("headers %q, want source=shop, tenant=t1 and trace-id=abc", hs)
	}
}

// Guarantee: a record without options' key, time or headers, of an
// envelope without headers, carries only its value.
func TestABareEnvelopesRecordCarriesOnlyItsValue(t *testing.T) {
	tp := &kTopic[int]{kname: "counts", b: &Backend[int]{opts: Options[int]{Codec: topic.IntCodec{}}}}
	var c completion
	if err := tp.encode(&c, topic.Envelope[int]{Value: 7}); err != nil {
		t.Fatal(err)
	}
	value, _ := c.msg.Value.Encode()
	if string(value) != "\x00\x00\x00\x00\x00\x00\x00\x07" || c.msg.Key != nil || !c.msg.Timestamp.IsZero() || c.msg.Headers != nil {
		t.Errorf("value %q, key %v, timestamp %v, headers %v; want only the value 7 in 8 big-endian bytes", value, c.msg.Key, c.msg.Timestamp, c.msg.Headers)
	}
}

// Guarantee: a record's headers, as this version or another producer
// writes them, are an envelope's headers key for key, the last value of a
// repeated key winning, and a record without headers has none.
func TestARecordsHeadersAreTheEnvelopesHeaders(t *testing.T) {
	var rec []*sarama.RecordHeader
	for _, h := range [][2]string{{"tenant", "t0"}, {"trace-id", "abc"}, {"tenant", "t1"}, {"empty", ""}} {
		rec = append(rec, &sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
	}
	want := topic.Headers{"tenant": "t1", "trace-id": "abc", "empty": ""}
	if got := envelopeHeaders(append(rec, nil)); !maps.Equal(got, want) {
		t.Errorf("headers %q, want %q", got, want)
	}
	if got := envelopeHeaders(nil); got != nil {
		t.Errorf("headers of a record without any = %q, want nil", got)
	}
}
