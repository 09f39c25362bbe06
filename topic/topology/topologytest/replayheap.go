package topologytest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// droppedWrites drops the letters Replay requeues onto the main topic and
// those it puts back on the DLQ, counting them, so that the backend,
// whose broker runs in the test's process, does not hold them: what grows
// is then Replay's own.
type droppedWrites struct {
	topology.Queues[Msg]
	requeued, kept *int
}

func (q droppedWrites) Requeue(context.Context, topology.Letter[Msg]) error {
	*q.requeued++
	return nil
}

func (q droppedWrites) DeadLetter(context.Context, topology.Letter[Msg]) error {
	*q.kept++
	return nil
}

// replayModes are the replays ReplayHeapGrowth measures: every letter
// replayed, a dry run (which keeps every letter and lists none), and a
// filter that keeps every letter.
var replayModes = []struct {
	name         string
	dryRun, keep bool
}{
	{"replaying every letter", false, false},
	{"a dry run", true, false},
	{"a filter that keeps every letter", false, true},
}

// ReplayHeapGrowth checks that replaying a DLQ holds no memory that grows
// with the DLQ's size, whether Replay replays every letter, makes a dry
// run, or keeps every letter its filter is offered: it dead-letters n
// letters of 1 KiB on the queues fresh returns, replays them (MaxListed
// -1, the requeues and the letters put back on the DLQ dropped), does the
// same with 4n letters on the queues a second call of fresh returns, and
// fails t when the second replay held more than perLetter bytes for each
// of the 3n letters more than the first. What a replay holds is the most
// live heap found while it ran (sampled at four points of its filter, the
// last letter's included) less the live heap before it. fresh returns the
// queues of a topology with a DLQ, on a backend (and, for a broker in the
// test's process, a broker) of their own, so that the first replay's
// leave nothing to the second. Each kind of replay runs as a subtest.
func ReplayHeapGrowth(t *testing.T, n int, perLetter int64, fresh func(t *testing.T) topology.Queues[Msg]) {
	t.Helper()
	n = max(n, 4)
	for _, mode := range replayModes {
		t.Run(mode.name, func(t *testing.T) {
			var held [2]int64
			for i, size := range []int{n, 4 * n} {
				before, during := replayHeap(t, fresh(t), size, mode.dryRun, mode.keep)
				held[i] = during - before
				t.Logf("%d letters of 1 KiB: live heap %s before Replay, up to %s while it ran (%+d bytes a letter)",
					size, mib(before), mib(during), held[i]/int64(size))
			}
			if grew := held[1] - held[0]; grew > int64(3*n)*perLetter {
				t.Errorf("Replay of %d letters held %d bytes more than Replay of %d (%d bytes for each letter more): "+
					"its memory grows with the DLQ", 4*n, grew, n, grew/int64(3*n))
			}
		})
	}
}

// replayHeap dead-letters n letters of 1 KiB on mq's DLQ, replays them
// (a dry run when dryRun, every letter kept by the filter when keep,
// every letter replayed otherwise), and returns the live heap before
// Replay and the most it found live while Replay ran.
func replayHeap(t *testing.T, mq topology.Queues[Msg], n int, dryRun, keep bool) (before, during int64) {
	t.Helper()
	top := mq.Topology()
	death := &topology.Death{Reason: topology.ReasonMaxRetries, Topic: top.Name(), Group: top.ConsumerGroup()}
	key := strings.Repeat("k", 1024)
	for i := range n {
		if err := mq.DeadLetter(t.Context(), topology.Letter[Msg]{Value: Msg{Key: key, N: i}, Death: death}); err != nil {
			t.Fatal(err)
		}
	}
	requeued, kept, seen := 0, 0, 0
	q := droppedWrites{Queues: mq, requeued: &requeued, kept: &kept}
	before = wait.LiveHeap()
	rep, err := topology.Replay(t.Context(), q, topology.ReplayOptions[Msg]{MaxListed: -1, DryRun: dryRun, Filter: func(*topology.Letter[Msg]) bool {
		seen++
		if seen%(n/4) == 0 || seen == n {
			during = max(during, wait.LiveHeap())
		}
		return !keep
	}})
	wantRequeued, wantKept, wantCount := n, 0, n
	switch {
	case keep:
		wantRequeued, wantKept, wantCount = 0, n, 0
	case dryRun:
		wantRequeued, wantKept = 0, n
	}
	if err != nil || requeued != wantRequeued || kept != wantKept || rep.Kept != wantKept || rep.ReplayedCount != wantCount {
		t.Fatalf("Replay = %d requeued, %d put back (%d kept, %d replayed reported), %v; want %d, %d (%d, %d)",
			requeued, kept, rep.Kept, rep.ReplayedCount, err, wantRequeued, wantKept, wantKept, wantCount)
	}
	return before, during
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
