package kafkatopic

import (
	"maps"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/fuzzcheck"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: for any record headers another producer (kcat) may write,
// envelopeHeaders never panics and allocates in proportion to them; it
// gives every header's key, with the value of the last header of that
// key, and nil for a record without headers; and the headers of any
// envelope, written by recordHeaders, read back as the same headers.
func FuzzEnvelopeHeaders(f *testing.F) {
	f.Add(fuzzcheck.Pairs("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate", "k=v"))
	f.Add([]byte(nil))
	f.Add(fuzzcheck.Pairs("", ""))
	f.Add(fuzzcheck.Pairs("a", "1", "a", "2", "b", "\xff\x00", "a", "3"))
	f.Add(fuzzcheck.Pairs("\xff\xfe", "\x1b[31m\n"))
	f.Add(fuzzcheck.Pairs("a", "1", "b")[:5])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var hs []*sarama.RecordHeader
		want := topic.Headers{}
		fuzzcheck.Split(b, func(k, v []byte) {
			hs = append(hs, &sarama.RecordHeader{Key: k, Value: v})
			want[string(k)] = string(v)
		})
		var got topic.Headers
		fuzzcheck.Bounded(t, "envelopeHeaders", len(b), func() { got = envelopeHeaders(hs) })
		if (got == nil) != (len(hs) == 0) || !maps.Equal(got, want) {
			t.Fatalf("envelopeHeaders = %q, want %q", got, want)
		}
		written, _ := recordHeaders(nil, nil, nil, topic.Envelope[int]{Headers: want})
		back := make([]*sarama.RecordHeader, len(written))
		for i := range written {
			back[i] = &written[i]
		}
		if again := envelopeHeaders(back); len(again)+len(want) > 0 && !maps.Equal(again, want) {
			t.Fatalf("round trip of %q = %q", want, again)
		}
	})
}
