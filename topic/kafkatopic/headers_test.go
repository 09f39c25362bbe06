package kafkatopic_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// Headers a message is published with reach every recipient (each group,
// each broadcast subscriber) as record headers, merged with those of
// Options.Headers (the message's own value wins on a shared key); a
// message published without any arrives with nil headers.
func TestHeadersReachEveryRecipient(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Headers = func(v int) []sarama.RecordHeader {
		if v != 1 {
			return nil
		}
		return []sarama.RecordHeader{{Key: []byte("origin"), Value: []byte("options")}, {Key: []byte("kind"), Value: []byte("int")}}
	}
	b := newBackend(t, o)
	h := newTopic(t, b, "headers", topic.Options{Mode: topic.Mixed})
	subs := []*topic.Subscription[int]{
		subscribe(t, h, topic.Balanced("a")), subscribe(t, h, topic.Balanced("b")), subscribe(t, h, topic.Broadcast()),
	}
	hdr := topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "origin": "publisher"}
	if out, err := h.PublishWithHeaders(ctxT(t), 1, hdr, topic.Block); err != nil || out != topic.Published {
		t.Fatalf("PublishWithHeaders = %v, %v", out, err)
	}
	if err := h.Publish(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	want := topic.Headers{"traceparent": hdr["traceparent"], "origin": "publisher", "kind": "int"}
	for _, s := range subs {
		it := recv(t, s)
		if it.Value != 1 || !maps.Equal(it.Headers, want) {
			t.Fatalf("%v received %d with headers %v, want 1 with %v", s.Mode(), it.Value, it.Headers, want)
		}
		it = recv(t, s)
		if it.Value != 2 || it.Headers != nil {
			t.Fatalf("%v received %d with headers %v, want 2 with none", s.Mode(), it.Value, it.Headers)
		}
	}
	if hdr["kind"] != "" || len(hdr) != 2 {
		t.Fatalf("the publisher's headers were changed: %v", hdr)
	}
}

// Guarantee: a Key, EventTime or Headers function that panics fails that
// publish with an error wrapping the *message.PanicError; the topic goes on
// publishing and delivering the other values.
func TestPanickingRecordFunctionsFailOnlyThatPublish(t *testing.T) {
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	boom := func(v int, what string) {
		if v == 1 {
			panic(what)
		}
	}
	o.Key = func(v int) []byte { boom(v, "Key"); return nil }
	o.EventTime = func(v int) time.Time { boom(v-1, "EventTime"); return time.Time{} }
	o.Headers = func(v int) []sarama.RecordHeader { boom(v-2, "Headers"); return nil }
	b := newBackend(t, o)
	h := newTopic(t, b, "panicking-record-functions", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	for v, what := range map[int]string{1: "Key", 2: "EventTime", 3: "Headers"} {
		err := h.Publish(ctxT(t), v)
		var pe *message.PanicError
		if !errors.As(err, &pe) || pe.Value != what {
			t.Fatalf("Publish(%d) = %v, want an error wrapping the %s panic", v, err, what)
		}
	}
	if err := h.Publish(ctxT(t), 4); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, s); it.Value != 4 {
		t.Fatalf("received %d, want 4, the one value published", it.Value)
	}
}
