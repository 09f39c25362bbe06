package acker_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: with acks arriving out of order, Next only ever covers the
// contiguous prefix of done positions.
func TestCheckpointContiguousPrefix(t *testing.T) {
	c := acker.NewCheckpoint(10)
	for p := uint64(10); p < 15; p++ {
		c.Track(p)
	}
	if c.Done(12) || c.Done(14) || c.Next() != 10 {
		t.Fatalf("acks behind a hole moved the checkpoint to %d", c.Next())
	}
	if !c.Done(10) || c.Next() != 11 {
		t.Fatalf("Next = %d after 10 done, want 11", c.Next())
	}
	if !c.Done(11) || c.Next() != 13 {
		t.Fatalf("Next = %d after 11 filled the hole, want 13", c.Next())
	}
	if !c.Done(13) || c.Next() != 15 || c.Pending() != 0 {
		t.Fatalf("Next = %d pending %d, want 15 and 0", c.Next(), c.Pending())
	}
}

// Guarantee: positions need not be consecutive (Kafka offset gaps); the
// checkpoint moves one past the last done position of the prefix.
func TestCheckpointGaps(t *testing.T) {
	c := acker.NewCheckpoint(0)
	for _, p := range []uint64{3, 7, 8, 20} {
		c.Track(p)
	}
	c.Done(8)
	c.Done(3)
	if c.Next() != 4 {
		t.Fatalf("Next = %d, want 4", c.Next())
	}
	c.Done(7)
	if c.Next() != 9 {
		t.Fatalf("Next = %d, want 9", c.Next())
	}
	if c.Done(5) || c.Done(8) {
		t.Fatal("an unknown or repeated ack reported progress")
	}
}

// Guarantee: Track refuses positions that do not increase, so a stale
// redelivery cannot corrupt the order.
func TestCheckpointTrackOrder(t *testing.T) {
	c := acker.NewCheckpoint(5)
	if c.Track(4) {
		t.Fatal("tracked a position below Next")
	}
	if !c.Track(6) || c.Track(6) || c.Track(5) {
		t.Fatal("tracked a position that does not increase")
	}
}

// Guarantee: Truncate drops the failed position and everything after it so
// they can be handed out again, and acks of dropped positions are ignored.
func TestCheckpointTruncate(t *testing.T) {
	c := acker.NewCheckpoint(0)
	for p := range uint64(6) {
		c.Track(p)
	}
	c.Done(0)
	c.Done(4)
	if !c.IsPending(2) {
		t.Fatal("2 should be pending")
	}
	c.Truncate(2)
	if c.Pending() != 1 || c.Next() != 1 {
		t.Fatalf("after Truncate(2): pending %d next %d, want 1 and 1", c.Pending(), c.Next())
	}
	if c.Done(4) {
		t.Fatal("an ack of a truncated position moved the checkpoint")
	}
	for p := uint64(2); p < 6; p++ {
		if !c.Track(p) {
			t.Fatalf("could not track %d again after Truncate", p)
		}
	}
	for p := uint64(5); p >= 1; p-- {
		c.Done(p)
		if p == 1 {
			break
		}
	}
	if c.Next() != 6 || c.Pending() != 0 {
		t.Fatalf("Next = %d pending %d, want 6 and 0", c.Next(), c.Pending())
	}
}

// Guarantee: under random ack orders and ring growth, Next always equals the
// length of the done prefix computed by brute force.
func TestCheckpointRandomised(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := acker.NewCheckpoint(0)
	const total = 5000
	done := make([]bool, total)
	var next uint64
	pending := []uint64{}
	tracked := uint64(0)
	for next < total {
		for tracked < total && len(pending) < 300 && r.IntN(3) > 0 {
			c.Track(tracked)
			pending = append(pending, tracked)
			tracked++
		}
		if len(pending) == 0 {
			continue
		}
		i := r.IntN(len(pending))
		p := pending[i]
		pending[i] = pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		done[p] = true
		c.Done(p)
		for next < total && done[next] {
			next++
		}
		if c.Next() != next {
			t.Fatalf("Next = %d, brute force %d", c.Next(), next)
		}
	}
	c.Reset(100)
	if c.Next() != 100 || c.Pending() != 0 {
		t.Fatal("Reset did not clear the checkpoint")
	}
}

// BenchmarkCheckpoint measures tracking and acking in windows of 64 acked in
// reverse order (the worst case for the prefix scan); it must not allocate
// in the steady state.
func BenchmarkCheckpoint(b *testing.B) {
	b.ReportAllocs()
	c := acker.NewCheckpoint(0)
	var pos uint64
	for b.Loop() {
		for range 64 {
			c.Track(pos)
			pos++
		}
		for k := uint64(1); k <= 64; k++ {
			c.Done(pos - k)
		}
	}
	if c.Pending() != 0 {
		b.Fatal("checkpoint did not drain")
	}
}

// Guarantee: Next never moves backwards, even at the top of the position
// space: one past math.MaxUint64 is not representable, so a checkpoint
// whose last position is done must not report 0 (a source committing it
// would restart its stream from the beginning).
func TestCheckpointNextNeverWrapsAround(t *testing.T) {
	c := acker.NewCheckpoint(math.MaxUint64 - 1)
	c.Track(math.MaxUint64 - 1)
	c.Track(math.MaxUint64)
	c.Done(math.MaxUint64 - 1)
	prev := c.Next()
	c.Done(math.MaxUint64)
	if c.Next() < prev {
		t.Fatalf("Next went from %d back to %d once position %d was done", prev, c.Next(), uint64(math.MaxUint64))
	}
}
