package topology_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: Memory.Held counts the letters a hold queue still holds:
// those released to their group once due no longer count, while those
// not yet due do.
func TestMemoryHeldCountsOnlyTheLettersNotYetDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(context.Background())
		q, err := m.Declare(t.Context(), build(t, topology.New("counted").Hold(5*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		hold := func(v int) {
			if err := q.Hold(t.Context(), 0, topology.Letter[int]{Value: v}); err != nil {
				t.Fatalf("Hold of letter %d = %v", v, err)
			}
		}
		hold(1)
		hold(2)
		time.Sleep(time.Second) // fake time: letter 3 falls due a second later
		hold(3)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if n, queued := m.Held("counted-hold-5s"), m.Queued("counted", "counted"); n != 1 || queued != 2 {
			t.Errorf("with letters 1 and 2 released and letter 3 not yet due: Held = %d, Queued = %d, want 1 and 2", n, queued)
		}
	})
}
