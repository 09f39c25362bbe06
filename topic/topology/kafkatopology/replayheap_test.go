package kafkatopology

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// droppedRequeues drops the letters Replay requeues onto the main topic,
// counting them, so that the cluster, which runs in the test's process,
// does not hold them: what grows is then Replay's own.
type droppedRequeues struct {
	topology.Queues[msg]
	requeued *int
}

func (q droppedRequeues) Requeue(context.Context, topology.Letter[msg]) error {
	*q.requeued++
	return nil
}

// replayHeap dead-letters n letters of 1 KiB on a cluster of its own,
// replays them all, and returns the live heap before Replay and the most
// it found live while Replay ran (sampled at four points of its filter,
// the last letter's included).
func replayHeap(t *testing.T, n int) (before, during int64) {
	t.Helper()
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs(), func(o *Options[msg]) {
		o.ReadAhead = 64
		o.Config.Consumer.Fetch.Default = 32 << 10
	})
	mq := declare(t, b, topology.New("big").DLQ())
	death := &topology.Death{Reason: topology.ReasonMaxRetries, Topic: "big", Group: mq.Topology().ConsumerGroup()}
	key := strings.Repeat("k", 1024)
	for i := range n {
		if err := mq.DeadLetter(t.Context(), topology.Letter[msg]{Value: msg{Key: key, N: i}, Death: death}); err != nil {
			t.Fatal(err)
		}
	}
	requeued, seen := 0, 0
	q := droppedRequeues{Queues: mq, requeued: &requeued}
	before = wait.LiveHeap()
	rep, err := topology.Replay(t.Context(), q, topology.ReplayOptions[msg]{MaxListed: -1, Filter: func(*topology.Letter[msg]) bool {
		seen++
		if seen%(n/4) == 0 || seen == n {
			during = max(during, wait.LiveHeap())
		}
		return true
	}})
	if err != nil || requeued != n || rep.Kept != 0 {
		t.Fatalf("Replay = %d requeued, %d kept, %v; want all %d replayed", requeued, rep.Kept, err, n)
	}
	return before, during
}

// Guarantee: replaying a Kafka DLQ holds no memory that grows with the
// DLQ's size when every letter is replayed: Replay pins the DLQ reader's
// end and reads, requeues and settles the letters a chunk at a time.
// Replaying four times the letters (8,000 rather than 2,000, of 1 KiB)
// adds less than 256 bytes a letter to what Replay holds (what the
// consumer group's client holds varies by some hundreds of KiB from one
// replay to the next); reading the DLQ whole first adds more than 1 KiB
// a letter.
func TestReplayingALargeDLQHoldsOnlyWhatItKeepsOnKafka(t *testing.T) {
	const n = 2000
	var held [2]int64
	for i, size := range []int{n, 4 * n} {
		before, during := replayHeap(t, size)
		held[i] = during - before
		t.Logf("%d letters of 1 KiB: live heap %s before Replay, up to %s while it ran (%+d bytes a letter)",
			size, mib(before), mib(during), held[i]/int64(size))
	}
	if grew := held[1] - held[0]; grew > int64(3*n)*256 {
		t.Errorf("Replay of %d letters held %d bytes more than Replay of %d (%d bytes for each letter more): "+
			"its memory grows with the DLQ", 4*n, grew, n, grew/int64(3*n))
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
