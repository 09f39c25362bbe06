package franz

import (
	"context"
	"fmt"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: the stats of a partition read to its end show the next
// offset to fetch as its end (the offset after the last record taken from
// the client) and no fetch lag.
func TestStatsOfAPartitionReadToItsEndShowNoFetchLag(t *testing.T) {
	const topic, group, records = "events", "g-fetch-lag", 10
	c := groupCluster(t, topic, records)
	src := ackCommittingSource(t, c, topic, group)
	runPipeline(t, "fetch-lag", src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil })
	stats := func() PartitionStats {
		if ms := src.Stats().Members; len(ms) == 1 && len(ms[0].Partitions) == 1 {
			return ms[0].Partitions[0]
		}
		return PartitionStats{}
	}
	wait.For(t, "every record committed", func() bool { return stats().Committed == records },
		func() string { return fmt.Sprintf("stats %+v", stats()) })
	if st := stats(); st.Next != records || st.HighWater != records || st.FetchLag != 0 {
		t.Fatalf("stats %+v: want next %d, high water %d and no fetch lag", st, records, records)
	}
}
