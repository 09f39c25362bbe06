package fuzzcheck

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

var sink []byte

// Guarantee: Bounded fails a decoding that allocates by a length its
// input claims (64 MiB for 10 bytes), and passes one that allocates in
// proportion to its input.
func TestBoundedFailsAnAllocationSizedByAClaimedLength(t *testing.T) {
	r := &recorder{TB: t}
	Bounded(r, "claimed", 10, func() { sink = make([]byte, 64<<20) })
	if !r.failed {
		t.Error("a 64 MiB allocation for 10 bytes of input passed")
	}
	r = &recorder{TB: t}
	Bounded(r, "proportional", 1<<20, func() { sink = make([]byte, 4<<20) })
	if r.failed {
		t.Error("a 4 MiB allocation for 1 MiB of input failed")
	}
	sink = nil
}

// Guarantee: SafeError fails an error text that is too long or holds a
// control character or invalid UTF-8, and passes a short printable one and
// nil.
func TestSafeErrorFailsLongOrUnprintableText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		fail bool
	}{
		{nil, false},
		{errors.New(`header "a" = "\x1b": not a count`), false},
		{errors.New(strings.Repeat("a", MaxErrorText+1)), true},
		{errors.New("a\nb"), true},
		{errors.New("\x1b[31m"), true},
		{errors.New("\xff"), true},
	} {
		r := &recorder{TB: t}
		SafeError(r, "err", tc.err)
		if r.failed != tc.fail {
			t.Errorf("SafeError(%q) failed %t, want %t", tc.err, r.failed, tc.fail)
		}
	}
}

// Guarantee: Split reads back every pair Pairs wrote, in order, and stops
// at a length past the end of its input.
func TestSplitReadsWhatPairsWrote(t *testing.T) {
	b := Pairs("a", "1", "", "", "a", "\xff")
	var got []string
	Split(b, func(k, v []byte) { got = append(got, string(k), string(v)) })
	if want := []string{"a", "1", "", "", "a", "\xff"}; !slices.Equal(got, want) {
		t.Fatalf("Split = %q, want %q", got, want)
	}
	got = nil
	Split(append(Pairs("k", "v"), 0x05, 'x'), func(k, v []byte) { got = append(got, string(k), string(v)) })
	if len(got) != 2 {
		t.Fatalf("Split of a truncated pair = %q, want only k, v", got)
	}
}
