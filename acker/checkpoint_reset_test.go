package acker_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: Reset forgets every tracked position, pending ones included, so
// a stream that restarts lower can be tracked again from the new position.
func TestCheckpointResetForgetsPending(t *testing.T) {
	c := acker.NewCheckpoint(0)
	for p := range uint64(5) {
		c.Track(p)
	}
	c.Done(0)
	c.Done(3)
	c.Reset(2)
	if c.Next() != 2 || c.Pending() != 0 {
		t.Fatalf("after Reset(2): next %d pending %d, want 2 and 0", c.Next(), c.Pending())
	}
	if c.IsPending(4) || c.Done(4) {
		t.Fatal("a position tracked before Reset is still known")
	}
	if !c.Track(3) {
		t.Fatal("could not track 3 after Reset(2): the old highest position was kept")
	}
	if !c.Done(3) || c.Next() != 4 {
		t.Fatalf("Next = %d after 3 done, want 4", c.Next())
	}
}
