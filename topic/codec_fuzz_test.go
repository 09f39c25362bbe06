package topic_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/fuzzcheck"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: the byte, string and int codecs decode any payload another
// producer wrote without panicking: BytesCodec and StringCodec give back
// its bytes, IntCodec an int exactly when it has 8 bytes and a
// *DecodeError of bounded, loggable text otherwise; and each encodes what
// it decoded back to the same bytes.
func FuzzByteCodecs(f *testing.F) {
	for _, b := range [][]byte{nil, {}, {0}, binary.BigEndian.AppendUint64(nil, 42), binary.BigEndian.AppendUint64(nil, 1<<63),
		bytes.Repeat([]byte{0xff}, 8), bytes.Repeat([]byte{0xff}, 9), []byte("\xff\xfe\x1b[0m\n"), bytes.Repeat([]byte("a"), 64<<10)} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := (topic.BytesCodec{}).Decode(b); err != nil || !bytes.Equal(v, b) {
			t.Fatalf("BytesCodec.Decode = %q, %v", v, err)
		}
		s, err := topic.StringCodec{}.Decode(b)
		if enc, _ := (topic.StringCodec{}).Encode(s); err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("StringCodec round trip = %q, %v", enc, err)
		}
		var n int
		fuzzcheck.Bounded(t, "IntCodec.Decode", len(b), func() { n, err = topic.IntCodec{}.Decode(b) })
		fuzzcheck.SafeError(t, "IntCodec.Decode", err)
		var de *topic.DecodeError
		switch {
		case len(b) != 8 && !errors.As(err, &de):
			t.Fatalf("IntCodec.Decode of %d bytes = %d, %v; want a *DecodeError", len(b), n, err)
		case len(b) == 8 && err != nil:
			t.Fatalf("IntCodec.Decode of 8 bytes: %v", err)
		case err == nil:
			if enc, _ := (topic.IntCodec{}).Encode(n); !bytes.Equal(enc, b) {
				t.Fatalf("IntCodec round trip of %x = %x", b, enc)
			}
		}
	})
}

// order is a payload as applications send them: scalars, a time, a
// pointer, a slice of structs and free-form attributes.
type order struct {
	ID    string         `json:"id"`
	Cents int64          `json:"cents"`
	Rate  float64        `json:"rate"`
	At    time.Time      `json:"at"`
	Note  *string        `json:"note,omitempty"`
	Lines []orderLine    `json:"lines"`
	Attrs map[string]any `json:"attrs"`
}

type orderLine struct {
	SKU string `json:"sku"`
	Qty uint16 `json:"qty"`
}

// Guarantee: JSONCodec decodes any payload another producer wrote without
// panicking, allocating in proportion to the payload; what it cannot
// decode is a *DecodeError whose text is bounded and safe to log, however
// long the payload's offending number or time; and a value it decodes
// encodes to a payload that decodes to a value that encodes the same (but
// a time with a zone offset of 24 hours, which encoding/json reads and
// does not write).
func FuzzJSONCodec(f *testing.F) {
	long := strings.Repeat("9", 2<<10) // longer than fuzzcheck.MaxErrorText
	for _, s := range []string{
		`{"id":"a-1","cents":250,"rate":0.5,"at":"2026-01-02T03:04:05.123456789+01:00","note":"gift","lines":[{"sku":"x","qty":2}],"attrs":{"k":[1,"two",null,{"n":true}]}}`,
		`{}`, `null`, ``, `{`, `{"id":`, `[]`, `"x"`,
		`{"cents":9223372036854775808}`, `{"cents":-9223372036854775809}`, `{"cents":1e999}`, `{"rate":1e999}`, `{"cents":` + long + `}`,
		`{"qty":-1}`, `{"lines":[{"qty":65536}]}`, `{"at":"` + long + `"}`, `{"at":"10000-01-01T00:00:00Z"}`, `{"at":"2026-01-02T03:04:05+24:00"}`,
		`{"id":"\ud800\xff\u001b[31m"}`, "{\"id\":\"\xff\xfe\"}", `{"id":"a","id":"b"}`, `{"ID":"upper"}`,
		`{"attrs":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"attrs":{"` + strings.Repeat("k", 4096) + `":1}}`,
	} {
		f.Add([]byte(s))
	}
	codec := topic.JSONCodec[order]{}
	f.Fuzz(func(t *testing.T, b []byte) {
		var (
			v   order
			err error
		)
		fuzzcheck.Bounded(t, "JSONCodec.Decode", len(b), func() { v, err = codec.Decode(b) })
		fuzzcheck.SafeError(t, "JSONCodec.Decode", err)
		if err != nil {
			var de *topic.DecodeError
			if !errors.As(err, &de) || de.Codec != "json" {
				t.Fatalf("JSONCodec.Decode error %v is not a *DecodeError", err)
			}
			return
		}
		enc, err := codec.Encode(v)
		var me *json.MarshalerError
		if errors.As(err, &me) && me.Type == reflect.TypeFor[time.Time]() {
			// encoding/json reads a time whose zone offset is 24 hours
			// ("+24:00") but does not write one: such a value does not
			// encode again, as with encoding/json alone.
			return
		}
		if err != nil {
			t.Fatalf("JSONCodec.Encode of a decoded %+v: %v", v, err)
		}
		w, err := codec.Decode(enc)
		if err != nil {
			t.Fatalf("JSONCodec.Decode of its own %s: %v", enc, err)
		}
		if again, err := codec.Encode(w); err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("round trip: %s encodes again as %s (%v)", enc, again, err)
		}
	})
}
