package kafkaoffset_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
)

// Guarantee: a partition's lag counts from the group's committed offset,
// or, while the group has none, from where its claim started; a group
// that starts at the newest record of a topic with a history is not
// reported behind by that history.
func TestLagCountsFromTheCommittedOffsetOrWhereTheClaimStarted(t *testing.T) {
	for _, c := range []struct {
		name                        string
		highWater, committed, start int64
		next                        int64
		wantLag, wantFetchLag       int64
	}{
		{"committed", 1000, 900, 0, 950, 100, 50},
		{"committed at 0", 1000, 0, 600, 700, 1000, 300},
		{"nothing committed: from the claim's start", 1000, -1, 990, 995, 10, 5},
		{"nothing committed, started at the newest record", 1000, -1, 1000, 1000, 0, 0},
		{"nothing committed, start not known yet", 1000, -1, -1, -1, 0, 0},
		{"nothing fetched yet from offset 0", 1000, -1, 0, 0, 1000, 1000},
		{"nothing committed, starting at the oldest record, not known yet", 1000, -1, kafkaoffset.StartOldest, -1, 1000, 0},
		{"no fetch response yet", 0, 10, 10, 10, 0, 0},
		{"committed past the high-water mark (truncated log)", 50, 80, 0, 90, 0, 0},
	} {
		lag, fetchLag := kafkaoffset.Lag(c.highWater, c.committed, c.start, c.next)
		if lag != c.wantLag || fetchLag != c.wantFetchLag {
			t.Errorf("%s: Lag(high water %d, committed %d, start %d, next %d) = %d, %d; want %d, %d",
				c.name, c.highWater, c.committed, c.start, c.next, lag, fetchLag, c.wantLag, c.wantFetchLag)
		}
	}
}
