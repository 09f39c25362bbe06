package claim

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
)

// fakeLog is a partition log for StartOffsets: the timestamps of its
// records, in offset order, and appends to make between listings.
type fakeLog struct {
	ts    map[string][]int64
	calls []string // "time" or "end", in the order StartOffsets listed
	// onList runs before the listing with this index answers.
	onList map[int]func()
}

func (f *fakeLog) list(kind string, at int64) Lister[string] {
	return func(_ context.Context, parts []string) (map[string]int64, error) {
		if fn := f.onList[len(f.calls)]; fn != nil {
			fn()
		}
		f.calls = append(f.calls, kind)
		out := make(map[string]int64, len(parts))
		for _, p := range parts {
			recs := f.ts[p]
			if kind == "end" {
				out[p] = int64(len(recs))
				continue
			}
			out[p] = -1
			for off, ts := range recs {
				if ts >= at {
					out[p] = int64(off)
					break
				}
			}
		}
		return out, nil
	}
}

// Guarantee: a partition with a record at or after the start time starts
// there; one without starts at its end, unless a record that late was
// appended before the end was listed, which it then starts at rather than
// skip.
func TestStartOffsetsNeverSkipARecordAppendedDuringTheLookup(t *testing.T) {
	const start = 100
	f := &fakeLog{ts: map[string][]int64{
		"found":    {10, 20, 150, 160}, // first record that late at 2
		"late":     {10, 20, 30},       // none that late: its end, 3
		"appended": {10, 20},           // one that late appended below
		"empty":    {},                 // one that late appended at offset 0
	}}
	// Between the first listing by time and the end listing, a late record
	// lands in "appended" at offset 2 (the end listing then says 3), and
	// one in "empty" at offset 0 (the end listing says 1).
	f.onList = map[int]func(){1: func() {
		f.ts["appended"] = append(f.ts["appended"], 120)
		f.ts["empty"] = append(f.ts["empty"], 130)
	}}
	parts := slices.Sorted(maps.Keys(f.ts))
	got, err := StartOffsets(context.Background(), parts, f.list("time", start), f.list("end", 0))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"found": 2, "late": 3, "appended": 2, "empty": 0}
	if !maps.Equal(got, want) {
		t.Fatalf("start offsets %v, want %v", got, want)
	}
	if !slices.Equal(f.calls, []string{"time", "end", "time"}) {
		t.Fatalf("listings %v, want by time, at the end, by time again", f.calls)
	}
}

// Guarantee: when every partition has a record that late, one listing is
// all it takes.
func TestStartOffsetsListOnceWhenEveryPartitionHasALateRecord(t *testing.T) {
	f := &fakeLog{ts: map[string][]int64{"a": {5, 200}, "b": {300}}}
	got, err := StartOffsets(context.Background(), []string{"a", "b"}, f.list("time", 100), f.list("end", 0))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"a": 1, "b": 0}; !maps.Equal(got, want) {
		t.Fatalf("start offsets %v, want %v", got, want)
	}
	if len(f.calls) != 1 {
		t.Fatalf("listings %v, want one by time", f.calls)
	}
}

// Guarantee: a listing that leaves out a partition it was asked about, or
// fails, is an error rather than a start offset made up for it.
func TestStartOffsetsFailOnAnIncompleteOrFailedListing(t *testing.T) {
	f := &fakeLog{ts: map[string][]int64{"a": {1}}}
	partial := func(context.Context, []string) (map[string]int64, error) { return map[string]int64{"a": -1}, nil }
	_, err := StartOffsets(context.Background(), []string{"a", "b"}, partial, f.list("end", 0))
	if !errors.Is(err, ErrNotListed) {
		t.Fatalf("error %v, want ErrNotListed", err)
	}
	boom := errors.New("broker down")
	failing := func(context.Context, []string) (map[string]int64, error) { return nil, boom }
	if _, err := StartOffsets(context.Background(), []string{"a"}, f.list("time", 5), failing); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the end listing's error", err)
	}
}
