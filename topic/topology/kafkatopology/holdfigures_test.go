package kafkatopology

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// holdsState describes b's Stats().Holds for a failure message.
func holdsState(b *Backend[msg]) func() string {
	return func() string { return fmt.Sprintf("Stats().Holds = %+v", b.Stats().Holds) }
}

// holdOf returns the figures of partition part of hold topic kname in
// b's Stats, and whether they are listed.
func holdOf(b *Backend[msg], kname string, part int32) (HoldStats, bool) {
	for _, h := range b.Stats().Holds {
		if h.Topic == kname && h.Partition == part {
			return h, true
		}
	}
	return HoldStats{}, false
}

// Guarantee: Stats lists every partition of every hold topic the
// releasers claim, ordered by topic and then partition, each with the
// letters held in that partition alone: five letters spread over a long
// hold's two partitions count five in all.
func TestStatsListEachHoldPartitionInOrderWithItsOwnLetters(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.Partitions = 2 })
	q := declare(t, b, topology.New("spread").Hold(time.Hour).Hold(2*time.Hour))
	first, second := q.(*queues[msg]).holds[0].name, q.(*queues[msg]).holds[1].name
	const held = 5
	for n := range held {
		if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, fmt.Sprintf("the four hold partitions listed, the %d letters held counted once each", held), func() bool {
		holds := b.Stats().Holds
		var waiting int64
		for _, h := range holds {
			if h.Topic == first {
				waiting += h.Waiting
			}
		}
		return len(holds) == 4 && waiting == held
	}, holdsState(b))
	want := []string{first + "/0", first + "/1", second + "/0", second + "/1"}
	for range 32 { // the releasers and their claims are kept in maps: each Stats must order them
		var listed []string
		for _, h := range b.Stats().Holds {
			listed = append(listed, fmt.Sprintf("%s/%d", h.Topic, h.Partition))
		}
		if !slices.Equal(listed, want) {
			t.Fatalf("Stats().Holds list %v, want %v: ordered by topic and then partition", listed, want)
		}
	}
}

// Guarantee: a hold record the releaser skipped (one this backend did
// not write) no longer counts in its partition's Waiting once skipped.
func TestASkippedHoldRecordDoesNotCountAsWaiting(t *testing.T) {
	b, hold := skipStrayHoldRecord(t, "stray-waiting")
	wait.For(t, "the skipped record's partition listed with none waiting", func() bool {
		h, ok := holdOf(b, hold, 0)
		return ok && h.HighWater == 1 && h.Waiting == 0
	}, holdsState(b))
}

// Guarantee: the letters a hold released before the backend closed do
// not count as waiting for the next backend of the topology: a claim
// starts from the group's committed offset.
func TestLettersReleasedBeforeARestartDoNotCountAsWaiting(t *testing.T) {
	c := testbroker.Kafka(t)
	tb := topology.New("restart-waiting").Hold(time.Second)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, tb)
	hold := q.(*queues[msg]).holds[0].name
	for n := range 2 {
		if err := q.Hold(t.Context(), 0, topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "both letters released", func() bool {
		h, ok := holdOf(b, hold, 0)
		return ok && h.Committed == 2 && h.Waiting == 0
	}, holdsState(b))
	topologytest.MustClose(t, "the backend", b.Close)

	next := newBackend(t, c.ListenAddrs())
	declare(t, next, tb)
	wait.For(t, "the next backend's releaser fetching the hold, none waiting", func() bool {
		h, ok := holdOf(next, hold, 0)
		return ok && h.HighWater == 2 && h.Waiting == 0
	}, holdsState(next))
}
