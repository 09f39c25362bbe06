package topic_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// Every built-in codec gives back what it was given.
func TestCodecsRoundTrip(t *testing.T) {
	for _, v := range []int{0, 1, -1, 1 << 40} {
		b, err := topic.IntCodec{}.Encode(v)
		if err != nil || len(b) != 8 {
			t.Fatalf("IntCodec.Encode(%d) = %x, %v", v, b, err)
		}
		if got, err := (topic.IntCodec{}).Decode(b); err != nil || got != v {
			t.Fatalf("IntCodec round trip of %d = %d, %v", v, got, err)
		}
	}
	type order struct {
		ID    string `json:"id"`
		Cents int    `json:"cents"`
	}
	jc := topic.JSONCodec[order]{}
	b, err := jc.Encode(order{"a-1", 250})
	if err != nil || string(b) != `{"id":"a-1","cents":250}` {
		t.Fatalf("JSONCodec.Encode = %s, %v", b, err)
	}
	if got, err := jc.Decode(b); err != nil || got != (order{"a-1", 250}) {
		t.Fatalf("JSONCodec.Decode = %+v, %v", got, err)
	}
	if b, _ := (topic.StringCodec{}).Encode("é"); string(b) != "é" {
		t.Fatalf("StringCodec.Encode = %q", b)
	}
	if s, _ := (topic.StringCodec{}).Decode([]byte("x")); s != "x" {
		t.Fatalf("StringCodec.Decode = %q", s)
	}
	if b, _ := (topic.BytesCodec{}).Decode([]byte{1, 2}); len(b) != 2 {
		t.Fatalf("BytesCodec.Decode = %v", b)
	}
}

// A payload of the wrong shape is a *DecodeError, not a panic.
func TestCodecRejectsMalformedPayload(t *testing.T) {
	_, err := topic.IntCodec{}.Decode([]byte{1, 2, 3})
	var de *topic.DecodeError
	if !errors.As(err, &de) || de.Codec != "int" {
		t.Fatalf("IntCodec.Decode(3 bytes) = %v, want *DecodeError", err)
	}
	_, err = topic.JSONCodec[int]{}.Decode([]byte("{"))
	var se *json.SyntaxError
	if !errors.As(err, &de) || de.Codec != "json" || !errors.As(err, &se) {
		t.Fatalf("JSONCodec.Decode(truncated JSON) = %#v, want a *DecodeError wrapping the *json.SyntaxError", err)
	}
}
