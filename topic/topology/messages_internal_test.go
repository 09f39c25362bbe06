package topology

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a sequenced source gives each message its shard's partition
// key, extra fields of its own (an error set on one never shows on
// another), and allocates per delivered batch, not per message.
func TestASequencedSourcesMessagesCarryTheirShardsKeyWithoutAnAllocationEach(t *testing.T) {
	s := &Source[int]{t: &Topology{name: "t"}, seq: &sequencer[int]{}, shards: []string{"t#0", "t#1", "t#2"}}
	const n = 256
	ls := make([]pendingLetter[int], n)
	for i := range ls {
		ls[i].l = Letter[int]{Value: i, Key: "k", Shard: i % len(s.shards)}
	}
	var slab message.Slab[int]
	msgs := s.messages(&slab, ls)
	for i, m := range msgs {
		if got, want := m.PartitionKey(), s.shards[i%len(s.shards)]; got != want {
			t.Fatalf("message %d: partition key %q, want %q", i, got, want)
		}
	}
	msgs[0].Fail(errors.New("boom"))
	if err := msgs[1].Err(); err != nil {
		t.Fatalf("an error set on one message shows on another: %v", err)
	}
	allocs := testing.AllocsPerRun(10, func() { s.messages(&slab, ls) })
	if allocs >= n/8 {
		t.Errorf("%v allocations for a batch of %d messages, want a few per batch", allocs, n)
	}
}
