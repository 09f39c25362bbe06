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

// Guarantee: the built-in codecs' bytes are a wire format a later version
// reads: IntCodec writes 8 big-endian bytes (two's complement) and reads
// them back, StringCodec and BytesCodec carry the bytes as they are.
func TestBuiltInCodecsKeepTheirWireFormat(t *testing.T) {
	for _, tc := range []struct {
		v    int
		wire string
	}{
		{7, "\x00\x00\x00\x00\x00\x00\x00\x07"},
		{-2, "\xff\xff\xff\xff\xff\xff\xff\xfe"},
		{1<<40 + 3<<8, "\x00\x00\x01\x00\x00\x00\x03\x00"},
	} {
		if b, err := (topic.IntCodec{}).Encode(tc.v); err != nil || string(b) != tc.wire {
			t.Errorf("IntCodec.Encode(%d) = %q, %v; want %q", tc.v, b, err, tc.wire)
		}
		if v, err := (topic.IntCodec{}).Decode([]byte(tc.wire)); err != nil || v != tc.v {
			t.Errorf("IntCodec.Decode(%q) = %d, %v; want %d", tc.wire, v, err, tc.v)
		}
	}
	if b, _ := (topic.StringCodec{}).Encode("é\x00"); string(b) != "\xc3\xa9\x00" {
		t.Errorf("StringCodec.Encode = %q, want %q", b, "\xc3\xa9\x00")
	}
	if b, _ := (topic.BytesCodec{}).Encode([]byte{0, 0xff}); string(b) != "\x00\xff" {
		t.Errorf("BytesCodec.Encode = %q, want %q", b, "\x00\xff")
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
