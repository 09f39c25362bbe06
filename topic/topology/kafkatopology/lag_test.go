package kafkatopology

import (
	"fmt"
	"io"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: Stats lists each partition the backend's group readers
// claim, with its group, high-water mark, committed and next offsets, and
// its lag read as the Kafka source's is: while letters wait unsettled
// (a handler that blocks), Lag is what was published to the partition
// minus what the group committed on the broker, and FetchLag what is not
// fetched yet; once every letter is settled and committed, both are 0.
func TestStatsReportTheLagOfEachClaimedPartition(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newLoggedBackend(t, c.ListenAddrs(), io.Discard, func(o *Options[topologytest.Msg]) { o.Partitions = 2 })
	q := declare(t, b, topology.New("orders"))
	kname, gid := q.(*queues[msg]).main, q.(*queues[msg]).groupID()
	r := subscribe(t, q)
	const published = 7 // 4 and 3: the partitions' lags differ
	for n := range published {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := sarama.NewClusterAdmin(c.ListenAddrs(), testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// broker reads what the cluster holds: each partition's log end and
	// the group's committed offset (-1: none).
	broker := func() (ends, committed map[int32]int64) {
		ends, committed = map[int32]int64{}, map[int32]int64{}
		resp, err := admin.ListConsumerGroupOffsets(gid, map[string][]int32{kname: {0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			if ends[p], err = b.client.GetOffset(kname, p, sarama.OffsetNewest); err != nil {
				t.Fatal(err)
			}
			committed[p] = -1
			if blk := resp.GetBlock(kname, p); blk != nil {
				committed[p] = blk.Offset
			}
		}
		return ends, committed
	}
	ends, committed := broker()
	if ends[0]+ends[1] != published || ends[0] == ends[1] {
		t.Fatalf("log ends %v, want %d letters over the 2 partitions, unevenly", ends, published)
	}

	// A handler that blocks: letters received and not settled.
	held := []topology.Letter[msg]{receiveOne(t, r), receiveOne(t, r), receiveOne(t, r)}
	fetched := func() bool {
		st := b.Stats()
		if len(st.Partitions) != 2 {
			return false
		}
		for _, ps := range st.Partitions {
			if ps.HighWater != ends[ps.Partition] || ps.Next != ends[ps.Partition] {
				return false
			}
		}
		return true
	}
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v, log ends %v", b.Stats().Partitions, ends) }
	wait.For(t, "both partitions claimed and fetched to their log end", fetched, state)
	for _, ps := range b.Stats().Partitions {
		p := ps.Partition
		if ps.Topic != kname || ps.Group != gid || ps.Committed != max(committed[p], 0) ||
			ps.Lag != ends[p]-max(committed[p], 0) || ps.FetchLag != 0 || ps.Lag == 0 {
			t.Errorf("with nothing settled, partition %d = %+v, want topic %q, group %q, committed %d, lag %d (published %d − committed %d), fetch lag 0",
				p, ps, kname, gid, committed[p], ends[p]-max(committed[p], 0), ends[p], committed[p])
		}
	}

	// The handler goes on: every letter settled, and committed.
	for i := range held {
		if err := r.Settle(t.Context(), &held[i]); err != nil {
			t.Fatal(err)
		}
	}
	for range published - len(held) {
		l := receiveOne(t, r)
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the group's offsets committed to the log ends", func() bool {
		_, committed = broker()
		return committed[0] == ends[0] && committed[1] == ends[1]
	}, func() string { return fmt.Sprintf("committed %v, log ends %v", committed, ends) })
	st := b.Stats()
	if len(st.Partitions) != 2 {
		t.Fatalf("Stats().Partitions = %+v once committed, want the 2 partitions", st.Partitions)
	}
	for _, ps := range st.Partitions {
		if ps.Committed != ends[ps.Partition] || ps.Lag != 0 || ps.FetchLag != 0 {
			t.Errorf("once handled and committed, partition %d = %+v, want committed %d and lags 0", ps.Partition, ps, ends[ps.Partition])
		}
	}
}
