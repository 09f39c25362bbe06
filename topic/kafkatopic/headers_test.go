package kafkatopic_test

import (
	"maps"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
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
