package kafkatopology

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A partition two readers claim for a moment of a rebalance is listed
// twice; whichever order the readers listed it in, the one furthest ahead
// comes first, so a collector keeping the first of each exports the same
// figures from one scrape to the next.
func TestAPartitionClaimedTwiceListsTheFurthestAheadFirst(t *testing.T) {
	var parts []PartitionStats
	for p := range int32(40) {
		behind := PartitionStats{Topic: "orders", Partition: p, Group: "g", Committed: 100, Next: 120, HighWater: 200}
		ahead := behind
		ahead.Committed, ahead.Next = 150, 150
		parts = append(parts, behind, ahead)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		in := slices.Clone(parts)
		rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		sortPartitions(in)
		for i := 0; i < len(in); i += 2 {
			first, second := in[i], in[i+1]
			if first.Partition != int32(i/2) || second.Partition != first.Partition {
				t.Fatalf("round %d: positions %d and %d hold partitions %d and %d, want %d twice", round, i, i+1, first.Partition, second.Partition, i/2)
			}
			if first.Committed != 150 {
				t.Fatalf("round %d: partition %d lists committed %d first, want the reader furthest ahead (committed 150)", round, first.Partition, first.Committed)
			}
		}
	}
}
