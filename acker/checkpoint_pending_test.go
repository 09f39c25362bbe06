package acker_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: a position acknowledged behind one still in flight is no
// longer pending, although it is not yet part of the committable prefix.
func TestCheckpointPositionDoneBehindAGapIsNotPending(t *testing.T) {
	c := acker.NewCheckpoint(1)
	for p := uint64(1); p <= 3; p++ {
		c.Track(p)
	}
	c.Done(2)
	if c.IsPending(2) {
		t.Fatal("IsPending(2) after Done(2), want false")
	}
	if !c.IsPending(1) || !c.IsPending(3) {
		t.Fatal("positions 1 and 3 are in flight, IsPending reports otherwise")
	}
	if c.Next() != 1 {
		t.Fatalf("Next = %d, want 1", c.Next())
	}
}

// Guarantee: an ack of a position that falls in a gap between tracked
// positions is ignored: it marks no neighbouring position done.
func TestCheckpointAckOfAnUntrackedPositionInAGapIsIgnored(t *testing.T) {
	c := acker.NewCheckpoint(10)
	for _, p := range []uint64{10, 20, 30} {
		c.Track(p)
	}
	if c.Done(15) || c.IsPending(15) {
		t.Fatal("untracked position 15 was taken for a tracked one")
	}
	if !c.IsPending(20) {
		t.Fatal("an ack of 15 marked 20 done")
	}
	c.Done(10)
	if c.Next() != 11 {
		t.Fatalf("Next = %d after acking 10, want 11: 20 was never acknowledged", c.Next())
	}
}

// Guarantee: after Truncate drops every tracked position, the stream may
// hand the dropped positions out again and they are tracked anew.
func TestCheckpointTruncatingEverythingLetsTheStreamRewind(t *testing.T) {
	c := acker.NewCheckpoint(5)
	for p := uint64(5); p <= 7; p++ {
		c.Track(p)
	}
	c.Truncate(5)
	if c.Pending() != 0 || c.Next() != 5 {
		t.Fatalf("after Truncate(5): pending %d next %d, want 0 and 5", c.Pending(), c.Next())
	}
	for p := uint64(5); p <= 7; p++ {
		if !c.Track(p) {
			t.Fatalf("Track(%d) refused after the stream rewound to 5", p)
		}
	}
	c.Done(5)
	c.Done(6)
	c.Done(7)
	if c.Next() != 8 {
		t.Fatalf("Next = %d, want 8", c.Next())
	}
}
