// Package fuzzcheck holds the checks the fuzz targets of the decoders of
// foreign bytes share: what a decoder allocates for one input is bounded
// by the input's size, and the text of an error it returns is bounded in
// length and safe to log (no control character, no invalid UTF-8); and
// the encoding of key and value pairs a fuzz target draws as one input.
// Only tests import it.
package fuzzcheck

import (
	"encoding/binary"
	"runtime/metrics"
	"strconv"
	"testing"
	"unicode/utf8"
)

// MaxErrorText is the longest error text a decoder may return for any
// input.
const MaxErrorText = 1024

// allocSlack is what a decoding may allocate besides what its input's size
// allows: bookkeeping of a constant size, and what the runtime or another
// goroutine allocates meanwhile.
const allocSlack = 1 << 20

// allocFactor is how many bytes a decoding may allocate per input byte:
// copies of the input (strings made of header values, an error that shows
// part of one) and the decoded value, whose overhead can be tens of bytes
// per input byte (encoding/json decoding "[[],[],…]" into an any
// allocates about 40).
const allocFactor = 64

// Allocated returns how many bytes of heap the process allocated while fn
// ran, as runtime/metrics counts them: without stopping the world, so
// that a fuzz target can ask on every input, and up to a few hundred
// kilobytes short (what the processors' caches hold, not yet counted).
func Allocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// Bounded runs fn, the decoding of an input of size bytes, and fails the
// test when it allocates more than allocFactor bytes per input byte
// (beyond a constant slack of 1 MiB): a decoder must never size what it
// allocates by a count or length the input claims.
func Bounded(t testing.TB, what string, size int, fn func()) {
	t.Helper()
	if n, limit := Allocated(fn), uint64(allocFactor*size+allocSlack); n > limit {
		t.Fatalf("%s: allocated %d bytes for %d bytes of input (limit %d)", what, n, size, limit)
	}
}

// SafeError fails the test when err's text is longer than MaxErrorText
// bytes, or holds a control character, another non-printable character or
// invalid UTF-8. A nil err passes.
func SafeError(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if len(msg) > MaxErrorText {
		t.Fatalf("%s: error of %d bytes (limit %d): %.200q", what, len(msg), MaxErrorText, msg)
	}
	for i, r := range msg {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			t.Fatalf("%s: error holds %q at byte %d: %.300q", what, r, i, msg)
		}
	}
}

// Pairs encodes strings, keys and values in turn (headers, properties),
// as the fuzz input Split reads: each string as its uvarint length and its
// bytes.
func Pairs(kv ...string) []byte {
	var b []byte
	for _, s := range kv {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// Split reads b as Pairs writes it and calls fn with each key and value,
// in order; they alias b. A length past the end of b ends the pairs
// there, a key without its value included.
func Split(b []byte, fn func(k, v []byte)) {
	next := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, false
		}
		s := b[w : w+int(n)]
		b = b[w+int(n):]
		return s, true
	}
	for {
		k, ok := next()
		if !ok {
			return
		}
		v, ok := next()
		if !ok {
			return
		}
		fn(k, v)
	}
}
