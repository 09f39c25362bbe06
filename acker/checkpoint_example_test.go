package acker_test

import (
	"fmt"

	"github.com/boulevard-go/boulevard/acker"
)

// A partition hands out offsets 10 to 14; acknowledgements arrive out of
// order, and the committable offset only moves over a contiguous prefix.
func ExampleCheckpoint() {
	cp := acker.NewCheckpoint(10)
	for off := uint64(10); off < 15; off++ {
		cp.Track(off)
	}
	for _, off := range []uint64{11, 12, 10, 14} {
		cp.Done(off)
		fmt.Printf("acked %d: commit %d, %d pending\n", off, cp.Next(), cp.Pending())
	}
	// Output:
	// acked 11: commit 10, 5 pending
	// acked 12: commit 10, 5 pending
	// acked 10: commit 13, 2 pending
	// acked 14: commit 13, 2 pending
}
