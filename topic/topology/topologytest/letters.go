package topologytest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// LetterDiff describes how b differs from a in what a backend carries of a
// letter: its value, key and history (shard, retries, failure times,
// Resume, death). Times compare as instants (time.Time.Equal), whatever
// their location. It returns "" when they do not differ; Receipt is not
// compared.
func LetterDiff[T comparable](a, b topology.Letter[T]) string {
	switch {
	case a.Value != b.Value:
		return fmt.Sprintf("value %v, want %v", b.Value, a.Value)
	case a.Key != b.Key:
		return fmt.Sprintf("key %q, want %q", b.Key, a.Key)
	case a.Shard != b.Shard:
		return fmt.Sprintf("shard %d, want %d", b.Shard, a.Shard)
	case a.Retries != b.Retries:
		return fmt.Sprintf("retries %d, want %d", b.Retries, a.Retries)
	case !a.FirstFailure.Equal(b.FirstFailure):
		return fmt.Sprintf("first failure %v, want %v", b.FirstFailure, a.FirstFailure)
	case !a.LastFailure.Equal(b.LastFailure):
		return fmt.Sprintf("last failure %v, want %v", b.LastFailure, a.LastFailure)
	case a.Resume != b.Resume:
		return fmt.Sprintf("resume %t, want %t", b.Resume, a.Resume)
	case (a.Death == nil) != (b.Death == nil):
		return fmt.Sprintf("death %+v, want %+v", b.Death, a.Death)
	case a.Death == nil:
		return ""
	}
	x, y := a.Death, b.Death
	switch {
	case x.Reason != y.Reason || x.Error != y.Error || x.Topic != y.Topic || x.Group != y.Group || x.Retries != y.Retries:
		return fmt.Sprintf("death %+v, want %+v", *y, *x)
	case !x.FirstFailure.Equal(y.FirstFailure) || !x.LastFailure.Equal(y.LastFailure):
		return fmt.Sprintf("death times %v, %v, want %v, %v", y.FirstFailure, y.LastFailure, x.FirstFailure, x.LastFailure)
	}
	return ""
}

// Bound maps n, as a fuzz target draws it, into [0, limit]: a count a
// letter can hold (a shard below topology.MaxRoutingShards, retries up to
// topology.MaxRetriesLimit).
func Bound(n, limit int) int {
	if n < 0 {
		n = -(n + 1)
	}
	return n % (limit + 1)
}

// Clock maps ns, as a fuzz target draws it, to a time a clock can read: a
// failure time of a letter, from 1970 to 2262, or the zero time for 0.
func Clock(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	if ns < 0 {
		ns = -(ns + 1)
	}
	return time.Unix(0, ns)
}

// DecodeVerdict fails t when a backend's decoding of a foreign record
// disagrees with what its input should give: one with a malformed history
// field (bad names it, "" when there is none) must be an error, and so
// must one whose value the codec refuses (codecErr); any other must
// decode, with a death's failure text of at most
// topology.MaxDeathErrorBytes. It reports whether the letter decoded,
// which it then checks no further.
func DecodeVerdict[T any](t testing.TB, bad string, err, codecErr error, l topology.Letter[T]) bool {
	t.Helper()
	switch {
	case bad != "" && err == nil:
		t.Fatalf("decoded a record with %s: %+v", bad, l)
	case bad == "" && codecErr == nil && err != nil:
		t.Fatalf("well-formed record does not decode: %v", err)
	case bad == "" && codecErr != nil && err == nil:
		t.Fatalf("decoded a record whose value does not decode (%v): %+v", codecErr, l)
	case err == nil && l.Death != nil && len(l.Death.Error) > topology.MaxDeathErrorBytes:
		t.Fatalf("decoded a death text of %d bytes, more than topology.MaxDeathErrorBytes", len(l.Death.Error))
	}
	return err == nil
}

// ExpectBoundedDeathError fails t unless got, the Death.Error a dead
// letter carries for the failure text text, is text bounded as
// topology.BoundDeathError bounds it: topology.MaxDeathErrorBytes at
// most in all, the start of text cut at a character boundary, then
// " … (N bytes cut)" with the bytes of text left out. text must be longer
// than the bound.
func ExpectBoundedDeathError(t testing.TB, text, got string) {
	t.Helper()
	kept, rest, ok := strings.Cut(got, " … (")
	note := strconv.Itoa(len(text)-len(kept)) + " bytes cut)"
	// Of the bound, the note takes its own bytes, and a character that
	// would not fit whole takes up to utf8.UTFMax-1 more.
	least := topology.MaxDeathErrorBytes - len(" … (") - len(strconv.Itoa(len(text))) - len(" bytes cut)") - (utf8.UTFMax - 1)
	switch {
	case !ok || len(got) > topology.MaxDeathErrorBytes || len(kept) < least:
		t.Fatalf("the dead letter's error is %d bytes (%.40q…), want at most %d in all, as much of the failure text as fits and how much was cut",
			len(got), got, topology.MaxDeathErrorBytes)
	case !strings.HasPrefix(text, kept) || !utf8.ValidString(kept):
		t.Fatalf("the dead letter's error does not start with the failure text, cut at a character boundary: %.40q…", got)
	case rest != note:
		t.Fatalf("the dead letter's error ends %q, want %q", rest, note)
	}
}
