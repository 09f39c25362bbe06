package kafkatopology

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: Stats lists each hold partition the backend's releasers
// claim with the letters waiting there: letters held in a long hold count
// in Waiting, those held after the releaser paused the partition for its
// head included, and a hold's Waiting is 0 once its letters are released
// and marked for commit; a closed backend lists none.
func TestStatsCountTheLettersWaitingInEachHold(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("backlog").Hold(time.Second).Hold(time.Hour))
	short, long := q.(*queues[msg]).holds[0].name, q.(*queues[msg]).holds[1].name
	r := subscribe(t, q)
	hold := func(i, n int) {
		t.Helper()
		if err := q.Hold(t.Context(), i, topology.Letter[msg]{Value: msg{N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	state := holdsState(b)

	hold(1, 1)
	wait.For(t, "the long hold's releaser paused for its first letter", func() bool { return b.pauses.Load() == 1 }, state)
	hold(1, 2) // not fetched while the partition is paused
	hold(1, 3)
	hold(0, 4)
	hold(0, 5)
	for range 2 {
		l := receiveOne(t, r)
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatal(err)
		}
	}
	// sums are a hold topic's figures over its partitions.
	sums := func() (waiting, highWater map[string]int64) {
		waiting, highWater = map[string]int64{}, map[string]int64{}
		for _, h := range b.Stats().Holds {
			waiting[h.Topic] += h.Waiting
			highWater[h.Topic] += h.HighWater
		}
		return waiting, highWater
	}
	wait.For(t, "3 letters waiting in the long hold, the short hold's 2 released", func() bool {
		waiting, highWater := sums()
		return waiting[long] == 3 && waiting[short] == 0 && highWater[short] == 2
	}, state)
	for _, h := range b.Stats().Holds {
		if h.Topic == short && h.Committed != h.HighWater {
			t.Errorf("short hold partition %+v, want committed at its high-water mark once released", h)
		}
	}

	topologytest.MustClose(t, "the backend", b.Close)
	if holds := b.Stats().Holds; len(holds) != 0 {
		t.Errorf("Stats().Holds = %+v once the backend closed, want none: its releasers claim nothing", holds)
	}
}
