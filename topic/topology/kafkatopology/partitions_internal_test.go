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

// Guarantee: of a partition two readers claim with the same committed
// offset, the one that fetched further (greater Next) is listed first,
// and with the same Next too, the one with the later high-water mark.
func TestAPartitionClaimedTwiceAtOneCommitListsTheFurthestFetchFirst(t *testing.T) {
	base := PartitionStats{Topic: "orders", Partition: 0, Group: "g", Committed: 100, Next: 120, HighWater: 200}
	fetched, fresher := base, base
	fetched.Next = 130
	fresher.HighWater = 210
	for _, tc := range []struct {
		what  string
		ahead PartitionStats
	}{{"the greater Next", fetched}, {"the later high-water mark", fresher}} {
		for _, in := range [][]PartitionStats{{base, tc.ahead}, {tc.ahead, base}} {
			sortPartitions(in)
			if in[0] != tc.ahead {
				t.Errorf("listed %+v first, want the one with %s, %+v", in[0], tc.what, tc.ahead)
			}
		}
	}
}

// Guarantee: a partition that two broadcast readers read (no group), each
// all along, lists the one furthest behind first, whichever order they
// listed it in: the one a collector keeping the first of each exports is
// the one to alert on.
func TestAPartitionTwoBroadcastReadersReadListsTheFurthestBehindFirst(t *testing.T) {
	behind := PartitionStats{Topic: "news", Partition: 0, Committed: 100, Next: 120, HighWater: 200}
	ahead := behind
	ahead.Committed, ahead.Next = 150, 150
	for _, in := range [][]PartitionStats{{behind, ahead}, {ahead, behind}} {
		sortPartitions(in)
		if in[0] != behind {
			t.Errorf("listed %+v first, want the broadcast reader furthest behind, %+v", in[0], behind)
		}
	}
}
