package pulsartopic

import (
	"maps"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/topic"
)

// The wire format of an envelope's message is what a later version, or
// another program, reads from the topic: payload bytes by the codec, key,
// event time and properties. The tests below write them as literals, so
// that a change fails here; such a change needs a release that reads both
// formats first (docs/topic-backends.md).

// wireMessage is a received message with a payload and properties.
type wireMessage struct {
	pulsar.Message
	payload []byte
	props   map[string]string
}

func (m wireMessage) Payload() []byte               { return m.payload }
func (m wireMessage) Properties() map[string]string { return m.props }
func (m wireMessage) RedeliveryCount() uint32       { return 2 }
func (m wireMessage) ID() pulsar.MessageID          { return nil }

type wireOrder struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// Guarantee: an envelope's message carries the codec's bytes as its
// payload, Options.Key as its key, Options.EventTime as its event time,
// and the envelope's headers as its properties, key for key; nothing else.
func TestAnEnvelopesMessageKeepsItsWireFormat(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 4, 5, 123000000, time.UTC)
	tp := &pTopic[wireOrder]{b: &Backend[wireOrder]{o: Options[wireOrder]{
		Codec:     topic.JSONCodec[wireOrder]{},
		Key:       func(o wireOrder) string { return o.ID },
		EventTime: func(wireOrder) time.Time { return at },
	}}}
	m, err := tp.encode(topic.Envelope[wireOrder]{Value: wireOrder{"a-1", 250}, Headers: topic.Headers{"trace-id": "abc", "tenant": "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload) != `{"id":"a-1","cents":250}` || m.Key != "a-1" || !m.EventTime.Equal(at) {
		t.Errorf("payload %q, key %q, event time %v; want %q, a-1, %v", m.Payload, m.Key, m.EventTime, `{"id":"a-1","cents":250}`, at)
	}
	if want := map[string]string{"trace-id": "abc", "tenant": "t1"}; !maps.Equal(m.Properties, want) {
		t.Errorf("properties %q, want %q", m.Properties, want)
	}
	if m.DeliverAfter != 0 || !m.DeliverAt.IsZero() || m.OrderingKey != "" || m.SequenceID != nil {
		t.Errorf("message %+v sets more than its payload, key, event time and properties", m)
	}
}

// Guarantee: a message without options' key or time, of an envelope
// without headers, carries only its payload.
func TestABareEnvelopesMessageCarriesOnlyItsPayload(t *testing.T) {
	tp := &pTopic[int]{b: &Backend[int]{o: Options[int]{Codec: topic.IntCodec{}}}}
	m, err := tp.encode(topic.Envelope[int]{Value: 7})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload) != "\x00\x00\x00\x00\x00\x00\x00\x07" || m.Key != "" || !m.EventTime.IsZero() || m.Properties != nil {
		t.Errorf("message %+v; want only the payload 7 in 8 big-endian bytes", m)
	}
}

// Guarantee: a message as this version or another producer writes it is
// received as the envelope of the codec's value, with the message's
// properties as its headers (none: nil) and the broker's redelivery count.
func TestAMessageIsReceivedAsItsEnvelope(t *testing.T) {
	s := &pSub[wireOrder]{t: &pTopic[wireOrder]{b: &Backend[wireOrder]{o: Options[wireOrder]{Codec: topic.JSONCodec[wireOrder]{}}}}}
	dst := make([]topic.Envelope[wireOrder], 2)
	ids := make([]pulsar.MessageID, 2)
	n := s.take(pulsar.ConsumerMessage{Message: wireMessage{payload: []byte(`{"id":"a-1","cents":250}`),
		props: map[string]string{"trace-id": "abc", "tenant": "t1"}}}, dst, ids, 0)
	n = s.take(pulsar.ConsumerMessage{Message: wireMessage{payload: []byte(`{"id":"a-2","cents":0}`), props: map[string]string{}}}, dst, ids, n)
	if n != 2 {
		t.Fatalf("took %d messages, want 2", n)
	}
	if e := dst[0]; e.Value != (wireOrder{"a-1", 250}) || !maps.Equal(e.Headers, topic.Headers{"trace-id": "abc", "tenant": "t1"}) || e.Redeliveries != 2 {
		t.Errorf("envelope %+v, want a-1 of 250 cents with headers trace-id=abc and tenant=t1, redelivered twice", e)
	}
	if e := dst[1]; e.Value != (wireOrder{"a-2", 0}) || e.Headers != nil {
		t.Errorf("envelope %+v, want a-2 of 0 cents without headers", e)
	}
}
