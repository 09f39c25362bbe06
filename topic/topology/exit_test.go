package topology_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a Replay filter that ends Replay's goroutine
// (runtime.Goexit, as t.FailNow does) loses no dead letter it took from
// an in-memory DLQ: the letters before it are replayed, the one it exited
// on and those after it stay in the DLQ.
func TestReplayFilterGoexitKeepsTheDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close(t.Context())
		top, _ := topology.New("fx").DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		for i := range 3 {
			l := topology.Letter[int]{Value: i, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "fx", Group: "fx"}}
			if err := q.DeadLetter(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			rep, err := topology.Replay(ctx, q, topology.ReplayOptions[int]{Filter: func(l *topology.Letter[int]) bool {
				if l.Value == 1 {
					runtime.Goexit()
				}
				return true
			}})
			t.Errorf("Replay returned %+v, %v; want the filter's exit to end its goroutine", rep, err)
		}()
		<-exited
		if m.Queued("fx", "fx") != 1 || m.Queued("fx-dlq", "") != 2 {
			t.Errorf("replayed %d (want 1), the DLQ holds %d (want 2)", m.Queued("fx", "fx"), m.Queued("fx-dlq", ""))
		}
	})
}
