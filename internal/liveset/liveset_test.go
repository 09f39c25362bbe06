package liveset_test

import (
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/liveset"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Guarantee: Close marks the owner closed, returns every live member once
// and leaves the set empty, so a second Close returns nothing.
func TestCloseTakesEveryMemberOnce(t *testing.T) {
	var (
		mu     sync.Mutex
		closed bool
	)
	live := map[int]struct{}{1: {}, 2: {}, 3: {}}
	got := liveset.Close(&mu, &closed, live)
	slices.Sort(got)
	if !closed || !slices.Equal(got, []int{1, 2, 3}) || len(live) != 0 {
		t.Fatalf("closed %v, members %v, left %v; want true, [1 2 3], none", closed, got, live)
	}
	if again := liveset.Close(&mu, &closed, live); len(again) != 0 {
		t.Fatalf("second Close returned %v, want nothing", again)
	}
	if !mu.TryLock() {
		t.Fatal("Close left the mutex locked")
	}
}
