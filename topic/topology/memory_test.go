package topology_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The in-memory backend passes the whole topology suite, in fake time.
func TestMemorySuite(t *testing.T) {
	topologytest.Run(t, topologytest.Config{
		Synctest: true,
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			return m
		},
	})
}

// Guarantee: two topologies whose derived hold names meet ("x" for group
// "g", and "x.g") each get their own retries back: the in-memory hold
// queue they share releases a letter to the group that held it, as the
// Kafka and Pulsar backends do.
func TestMeetingHoldNamesReleaseToTheirOwnGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{})
		defer m.Close()
		t1, err := topology.New("x").ForConsumerGroup("g").Hold(time.Second).Build()
		if err != nil {
			t.Fatal(err)
		}
		t2, err := topology.New("x.g").Hold(time.Second).Build()
		if err != nil {
			t.Fatal(err)
		}
		if t1.Names()[1] != t2.Names()[1] {
			t.Fatalf("hold names %v and %v do not meet", t1.Names(), t2.Names())
		}
		q1, err := m.Declare(t.Context(), t1)
		if err != nil {
			t.Fatal(err)
		}
		q2, err := m.Declare(t.Context(), t2)
		if err != nil {
			t.Fatal(err)
		}
		if err := q2.Hold(t.Context(), 0, topology.Letter[int]{Value: 7}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		r1, _ := q1.Subscribe(t.Context())
		defer r1.Close()
		r2, _ := q2.Subscribe(t.Context())
		defer r2.Close()
		buf := make([]topology.Letter[int], 4)
		n1, _ := r1.TryReceive(buf)
		n2, _ := r2.TryReceive(buf)
		if n1 != 0 || n2 != 1 {
			t.Errorf("the retry of %q reached group %q %d times and its own group %d times, want 0 and 1",
				t2.Name(), t1.ConsumerGroup(), n1, n2)
		}
	})
}

// Guarantee: Replay loses no dead letter it took from an in-memory DLQ
// when putting one back on the main topic fails (here: the group's queue
// is full and the operator's context ends): every letter is either
// replayed, and reported so, or still in the DLQ.
func TestReplayFailureKeepsTheDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := topology.NewMemory[int](topology.MemoryOptions{Capacity: 4})
		defer m.Close()
		top, _ := topology.New("rp").DLQ().Build()
		q, _ := m.Declare(t.Context(), top)
		for i := range 4 { // the group's queue is full: its consumers are down
			if err := q.Publish(t.Context(), topology.Letter[int]{Value: 100 + i}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			l := topology.Letter[int]{Value: i, Death: &topology.Death{Reason: topology.ReasonRejected, Topic: "rp", Group: "rp"}}
			if err := q.DeadLetter(t.Context(), l); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		rep, err := topology.Replay(ctx, q, topology.ReplayOptions[int]{})
		if err == nil {
			t.Fatal("Replay into a full queue succeeded")
		}
		replayed := m.Queued("rp", "rp") - 4 // what Replay put after the four publishes
		if got := replayed + m.Queued("rp-dlq", ""); got != 3 || len(rep.Replayed) != replayed {
			t.Errorf("Replay failed (%v) after replaying %d letters (reported %d), and the DLQ holds %d: %d of 3 dead letters lost",
				err, replayed, len(rep.Replayed), m.Queued("rp-dlq", ""), 3-got)
		}
	})
}
