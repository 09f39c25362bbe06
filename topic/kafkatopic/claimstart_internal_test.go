package kafkatopic

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

// fixedHighWater is a claim's consumer whose high-water mark is hw.
type fixedHighWater int64

func (hw fixedHighWater) HighWaterMarkOffset() int64 { return int64(hw) }

// Guarantee: a balanced claim with no committed offset counts its lag
// from the first record it fetches when that record lies past the log
// start known as the claim began (retention deleted the records between
// them meanwhile), and from the oldest record it fetches when it began
// not knowing the log start; the records it fetches after do not move
// where its lag counts from.
func TestAClaimsLagCountsFromItsFirstRecordFetchedPastTheLogStartItBeganWith(t *testing.T) {
	for _, tc := range []struct {
		name        string
		start       int64 // where the claim began
		first, then int64 // the offsets of the records it fetches
		want        int64 // its lag with the high-water mark at 100
	}{
		{"records deleted since it began", 10, 40, 41, 60},
		{"its first record at the log start it began with", 10, 10, 11, 90},
		{"the log start not known as it began", kafkaoffset.StartOldest, 30, 31, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMember(1, 0, 0)
			defer m.cancel()
			c := kafkaoffset.New(session{}, "t", 0)
			m.claims = map[*kafkaoffset.Claim]claimFigures{c: {committed: -1, start: tc.start, hw: fixedHighWater(100)}}
			m.mu.Lock()
			m.fetched(c, tc.first)
			m.fetched(c, tc.then)
			m.mu.Unlock()
			ps := m.appendPartitions(nil)
			if len(ps) != 1 || ps[0].Lag != tc.want {
				t.Fatalf("claim begun at %d, records %d and %d fetched, high water 100: Stats = %+v, want lag %d", tc.start, tc.first, tc.then, ps, tc.want)
			}
		})
	}
}
