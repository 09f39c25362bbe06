package topologytest

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// WireLetter is the letter a backend's wire format tests write and read:
// a dead letter of topic "orders" and group "billing" with every field of
// its history set and its times in a zone other than UTC (CET, +01:00), so
// that a backend writing them in their own zone shows. Its value is
// {"key":"A","n":7} in JSON, its key "customer-42"; in UTC its times are
// FirstFailure and Death.FirstFailure 2026-03-01T12:04:05.123456789Z,
// LastFailure 2026-03-01T12:06:00.5Z, Death.LastFailure
// 2026-03-01T12:06:00Z.
func WireLetter() topology.Letter[Msg] {
	cet := time.FixedZone("CET", 3600)
	first := time.Date(2026, 3, 1, 13, 4, 5, 123456789, cet)
	return topology.Letter[Msg]{
		Value:        Msg{Key: "A", N: 7},
		Key:          "customer-42",
		Shard:        3,
		Retries:      2,
		FirstFailure: first,
		LastFailure:  time.Date(2026, 3, 1, 13, 6, 0, 500000000, cet),
		Resume:       true,
		Death: &topology.Death{
			Reason: topology.ReasonMaxRetries, Error: "boom", Topic: "orders", Group: "billing", Retries: 2,
			FirstFailure: first,
			LastFailure:  time.Date(2026, 3, 1, 12, 6, 0, 0, time.UTC),
		},
	}
}

// CheckWireLetter reports every field of got, a letter decoded from
// WireLetter's record as a backend writes it, that differs from
// WireLetter's (times compared as instants; the key only when withKey).
func CheckWireLetter(t testing.TB, got topology.Letter[Msg], withKey bool) {
	t.Helper()
	want := WireLetter()
	if withKey && got.Key != want.Key {
		t.Errorf("Key = %q, want %q", got.Key, want.Key)
	}
	if got.Value != want.Value || got.Shard != want.Shard || got.Retries != want.Retries || got.Resume != want.Resume {
		t.Errorf("Value, Shard, Retries, Resume = %v, %d, %d, %t; want %v, %d, %d, %t",
			got.Value, got.Shard, got.Retries, got.Resume, want.Value, want.Shard, want.Retries, want.Resume)
	}
	if got.Death == nil {
		t.Fatal("Death = nil, want one")
	}
	for _, tc := range []struct {
		what      string
		got, want time.Time
	}{
		{"FirstFailure", got.FirstFailure, want.FirstFailure},
		{"LastFailure", got.LastFailure, want.LastFailure},
		{"Death.FirstFailure", got.Death.FirstFailure, want.Death.FirstFailure},
		{"Death.LastFailure", got.Death.LastFailure, want.Death.LastFailure},
	} {
		if !tc.got.Equal(tc.want) {
			t.Errorf("%s = %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	gd, wd := *got.Death, *want.Death
	gd.FirstFailure, gd.LastFailure, wd.FirstFailure, wd.LastFailure = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if gd != wd {
		t.Errorf("Death = %+v, want %+v", gd, wd)
	}
}
