package kafkatopology

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: Stats lists each partition of the main topic a broadcast
// reader reads, without a group, with its position as Committed: the
// letters published and fetched but not received yet count in its Lag
// (FetchLag 0), and once received, or a record skipped because it does
// not decode, Lag is 0 and Committed is the log end.
func TestStatsListABroadcastReadersPartitionsWithTheLettersItHasNotHandedOut(t *testing.T) {
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) { o.Partitions = 2 })
	q := declare(t, b, topology.New("bulletin").Broadcast())
	kname := q.(*queues[msg]).main
	r := subscribe(t, q)
	const published = 5
	for n := range published {
		if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	ends := map[int32]int64{}
	for p := range int32(2) {
		end, err := b.client.GetOffset(kname, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		ends[p] = end
	}
	state := func() string { return fmt.Sprintf("Stats().Partitions = %+v, log ends %v", b.Stats().Partitions, ends) }
	// figures reports whether Stats lists both partitions, each without a
	// group, fetched to its log end, with ok true of it.
	figures := func(ok func(PartitionStats) bool) bool {
		parts := b.Stats().Partitions
		if len(parts) != 2 {
			return false
		}
		for i, ps := range parts {
			if ps.Topic != kname || ps.Partition != int32(i) || ps.Group != "" ||
				ps.Next != ends[ps.Partition] || ps.HighWater != ends[ps.Partition] || ps.FetchLag != 0 || !ok(ps) {
				return false
			}
		}
		return true
	}
	wait.For(t, "both partitions listed, fetched, their letters not received counted in Lag", func() bool {
		return figures(func(ps PartitionStats) bool { return ps.Committed == 0 && ps.Lag == ends[ps.Partition] })
	}, state)

	for range published {
		receiveOne(t, r)
	}
	if !figures(func(ps PartitionStats) bool { return ps.Committed == ends[ps.Partition] && ps.Lag == 0 }) {
		t.Fatalf("every letter received: want Committed at the log end and Lag 0; %s", state())
	}

	if err := b.send(&sarama.ProducerMessage{Topic: kname, Partition: 0, Value: sarama.StringEncoder("not json")}); err != nil {
		t.Fatal(err)
	}
	ends[0]++
	wait.For(t, "the record that does not decode skipped, Lag 0 again", func() bool {
		return figures(func(ps PartitionStats) bool { return ps.Committed == ends[ps.Partition] && ps.Lag == 0 })
	}, state)
}
