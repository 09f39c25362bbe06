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
	kept := cap(buf)
	allocs := testing.AllocsPerRun(100, func() {
		dst, buf = recordHeaders(dst[:0], buf, nil, e)
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per record's headers with their arrays kept, want 0", allocs)
	}
	if cap(buf) != kept || len(buf) != headerBytes(e.Headers) {
		t.Fatalf("after 100 records the kept array holds %d bytes of %d, want %d of %d: each record's headers are written from its start",
			len(buf), cap(buf), headerBytes(e.Headers), kept)
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

// headerBytes is the length of the keys and values of hs.
func headerBytes(hs topic.Headers) int {
	n := 0
	for k, v := range hs {
		n += len(k) + len(v)
	}
	return n
}

// Without a kept array large enough, the envelope's headers are written
// into one array allocated at once, exactly as large as their bytes.
func TestRecordHeadersAllocateOneArrayOfTheirSize(t *testing.T) {
	e := topic.Envelope[int]{Headers: topic.Headers{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "acme", "a": ""}}
	n := headerBytes(e.Headers)
	dst := make([]sarama.RecordHeader, 0, len(e.Headers))
	for _, kept := range [][]byte{nil, make([]byte, 1, n-1)} {
		var buf []byte
		allocs := testing.AllocsPerRun(100, func() {
			_, buf = recordHeaders(dst[:0], kept, nil, e)
		})
		if allocs != 1 || cap(buf) != n {
			t.Fatalf("with a kept array of %d bytes: %.2f allocations, into an array of %d bytes, want 1 of %d",
				cap(kept), allocs, cap(buf), n)
		}
	}
}

// A nil record header (an interceptor's) is skipped; the others are read.
func TestEnvelopeHeadersSkipANilHeader(t *testing.T) {
	hs := []*sarama.RecordHeader{nil, {Key: []byte("tenant"), Value: []byte("acme")}, nil, {Key: []byte("a"), Value: []byte("1")}, nil}
	got := envelopeHeaders(hs)
	if want := (topic.Headers{"tenant": "acme", "a": "1"}); !maps.Equal(got, want) {
		t.Fatalf("envelopeHeaders = %q, want %q", got, want)
	}
}

// A recycled completion keeps the array of its record's header bytes for
// the next record only while it is small (a few KiB): a record with large
// headers does not leave its array held by the pool.
func TestARecycledCompletionKeepsOnlyASmallHeaderArray(t *testing.T) {
	p := &producer{}
	p.pool.New = func() any { return &completion{done: make(chan error, 1)} }
	for _, size := range []int{64, 4 << 10, 4<<10 + 1, 64 << 10} {
		c := p.get()
		c.hbuf = make([]byte, 0, size)
		p.put(c)
		if kept, want := c.hbuf != nil, size <= 4<<10; kept != want {
			t.Fatalf("a recycled completion kept its header array of %d bytes: %v, want %v", size, kept, want)
		}
	}
}

// A completion keeps the array its record's header bytes were written
// into: its next record's headers are written into the same array.
func TestACompletionWritesItsNextRecordsHeadersIntoTheSameArray(t *testing.T) {
	kt := &kTopic[int]{b: &Backend[int]{opts: Options[int]{Codec: topic.IntCodec{}}}, kname: "t"}
	e := topic.Envelope[int]{Value: 1, Headers: topic.Headers{"tenant": "acme"}}
	c := &completion{}
	var arrays [2]*byte
	for i := range arrays {
		if err := kt.encode(c, e); err != nil {
			t.Fatal(err)
		}
		if len(c.hbuf) == 0 {
			t.Fatalf("record %d: the completion kept no array of its header bytes", i)
		}
		arrays[i] = &c.hbuf[0]
		if h := c.msg.Headers[0]; &h.Key[0] != arrays[i] {
			t.Fatalf("record %d: its header %q is not in the completion's kept array", i, h.Key)
		}
	}
	if arrays[0] != arrays[1] {
		t.Fatal("the second record's headers were written into a new array")
	}
}
