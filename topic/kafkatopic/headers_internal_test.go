package kafkatopic

import (
	"bytes"
	"maps"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/topic"
)

// The envelope's headers are written into the record from a byte array the
// publisher keeps: once it is large enough, writing them allocates
// nothing.
func TestRecordHeadersReuseTheirBytes(t *testing.T) {
	e := topic.Envelope[int]{Headers: topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "acme"}}
	var dst []sarama.RecordHeader
	var buf []byte
	dst, buf = recordHeaders(dst, buf, nil, e)
	allocs := testing.AllocsPerRun(100, func() {
		dst, buf = recordHeaders(dst[:0], buf, nil, e)
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per record's headers with their arrays kept, want 0", allocs)
	}
	got := topic.Headers{}
	for _, h := range dst {
		got[string(h.Key)] = string(h.Value)
	}
	if !maps.Equal(got, e.Headers) {
		t.Fatalf("headers written = %q, want %q", got, e.Headers)
	}
}

// Each record header's key and value end where its bytes end: appending
// to one (as an interceptor may) never writes over another; and an empty
// key or value is written as empty, not as null (which sarama writes as a
// length of -1).
func TestRecordHeadersAreSeparateAndEmptyIsNotNull(t *testing.T) {
	for _, buf := range [][]byte{nil, make([]byte, 0, 64)} {
		e := topic.Envelope[int]{Headers: topic.Headers{"a": "1", "b": "2", "": ""}}
		dst, _ := recordHeaders(nil, buf, nil, e)
		if len(dst) != 3 {
			t.Fatalf("%d headers written, want 3", len(dst))
		}
		for i := range dst {
			if dst[i].Key == nil || dst[i].Value == nil {
				t.Fatalf("header %d = %q: %q, want non-nil key and value", i, dst[i].Key, dst[i].Value)
			}
		}
		for i := range dst {
			dst[i].Key = append(dst[i].Key, 'x')
			dst[i].Value = append(dst[i].Value, 'y')
		}
		for i := range dst {
			k, v := string(dst[i].Key), string(dst[i].Value)
			if want := e.Headers[k[:len(k)-1]] + "y"; v != want {
				t.Fatalf("after appending to every header, %q = %q, want %q", k, v, want)
			}
		}
	}
	dst, _ := recordHeaders(nil, nil, nil, topic.Envelope[int]{Headers: topic.Headers{"": ""}})
	if len(dst) != 1 || dst[0].Key == nil || dst[0].Value == nil {
		t.Fatalf("headers of an empty key and value = %q, want one with a non-nil key and value", dst)
	}
}

// A record's headers become an envelope's with one allocation beyond the
// map's own: their keys and values share one string.
func TestEnvelopeHeadersShareOneString(t *testing.T) {
	hs := []*sarama.RecordHeader{
		{Key: []byte("traceparent"), Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		{Key: []byte("tenant"), Value: []byte("acme")},
	}
	var sink topic.Headers
	keys := []string{"traceparent", "tenant"}
	mapAllocs := testing.AllocsPerRun(100, func() {
		sink = make(topic.Headers, len(hs))
		for _, k := range keys {
			sink[k] = k
		}
	})
	allocs := testing.AllocsPerRun(100, func() { sink = envelopeHeaders(hs) })
	if allocs != mapAllocs+1 {
		t.Fatalf("%.2f allocations per record's headers, want %.2f (the map's) + 1", allocs, mapAllocs)
	}
	for _, h := range hs {
		if got := sink[string(h.Key)]; got != string(h.Value) {
			t.Fatalf("%s = %q, want %q", h.Key, got, h.Value)
		}
	}
	if !bytes.Equal(hs[1].Value, []byte("acme")) {
		t.Fatal("envelopeHeaders changed the record's headers")
	}
}
