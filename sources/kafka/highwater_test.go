package kafka_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a partition's lag counts the records produced while its
// handlers are stuck and its records fill the read-ahead and the client's
// buffer, which stop the client fetching: the member lists the partition's
// end offset every HighWaterInterval, and the high-water mark and lag of
// Stats count from the higher of the fetched and the listed one.
func TestLagCountsRecordsProducedWhileTheBufferIsFull(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const before, after = 300, 100
		c := newCluster(t, 1)
		produce(t, c, 1, 0, before)
		opts := sourceOptions(c, "g-lag-full")
		opts.HighWaterInterval = 50 * time.Millisecond
		src := cl.new(t, opts)
		p, resume := startStalled(t, "lag-full", src, newLedger(), 5)
		defer stopPipeline(t, p)
		defer resume() // before the stop

		partition := func() (kafka.PartitionStats, bool) {
			st := src.Stats()
			if len(st.Members) != 1 || len(st.Members[0].Partitions) != 1 {
				return kafka.PartitionStats{}, false
			}
			return st.Members[0].Partitions[0], true
		}
		state := func() string {
			ps, _ := partition()
			return fmt.Sprintf("%+v", ps)
		}
		wait.For(t, "the records produced first taken in and counted as lag", func() bool {
			ps, ok := partition()
			return ok && ps.Next == before && ps.HighWater == before && ps.Lag == before
		}, state)

		// The handler still holds the first record: nothing is committed,
		// and the records produced now are not fetched.
		produce(t, c, 1, before, after)
		wait.For(t, "the records produced while the buffer is full counted as lag", func() bool {
			ps, ok := partition()
			return ok && ps.HighWater == before+after && ps.Lag == before+after && ps.FetchLag >= after
		}, state)
	})
}
