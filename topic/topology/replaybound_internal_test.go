package topology

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testsize"
)

func mustBuild(t *testing.T, b *Builder) *Topology {
	t.Helper()
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// uncountedRequeues drops the letters Replay requeues onto the main
// topic, counting them, so that the in-memory main queue does not hold
// them: what grows is then Replay's own.
type uncountedRequeues struct {
	Queues[[]byte]
	requeued *int
}

func (q uncountedRequeues) Requeue(context.Context, Letter[[]byte]) error {
	*q.requeued++
	return nil
}

// liveHeap returns the bytes the heap holds live after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// replayHeap fills a DLQ on the in-memory backend with n dead letters of
// 1 KiB, replays them (a dry run when dryRun, every letter kept by the
// filter when keep, every letter replayed otherwise), and returns the
// live heap before Replay and the most it found live while Replay ran
// (sampled at four points of its filter, the last letter's included).
// The letters kept go back to the DLQ, which held them before Replay.
func replayHeap(t *testing.T, n int, dryRun, keep bool) (before, during uint64) {
	t.Helper()
	m, err := NewMemory[[]byte](MemoryOptions{Capacity: min(n, MaxMemoryCapacity)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	mq, err := m.Declare(t.Context(), mustBuild(t, New("big").DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l := Letter[[]byte]{Value: make([]byte, 1024), Death: &Death{Reason: ReasonMaxRetries, Topic: "big", Group: "big"}}
		l.Value[0] = byte(i)
		if err := mq.DeadLetter(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	requeued, seen := 0, 0
	q := uncountedRequeues{Queues: mq, requeued: &requeued}
	before = liveHeap()
	rep, err := Replay(t.Context(), q, ReplayOptions[[]byte]{DryRun: dryRun, Filter: func(*Letter[[]byte]) bool {
		seen++
		if seen%(n/4) == 0 || seen == n {
			during = max(during, liveHeap())
		}
		return !keep
	}})
	wantRequeued, wantKept := n, 0
	if dryRun || keep {
		wantRequeued, wantKept = 0, n
	}
	if err != nil || requeued != wantRequeued || rep.Kept != wantKept {
		t.Fatalf("Replay = %d requeued, %d kept, %v; want %d and %d", requeued, rep.Kept, err, wantRequeued, wantKept)
	}
	return before, during
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Guarantee: replaying a DLQ holds, beyond the letters the DLQ itself
// holds, no memory that grows with the DLQ's size, whether it replays
// every letter, makes a dry run or keeps every letter: the letters are
// read, then requeued or put back on the DLQ, and settled a chunk at a
// time, and the report lists a bounded number of them. Replaying four
// times the letters adds less than 64 bytes a letter to what Replay
// holds. BOULEVARD_REPLAY_LETTERS sets the smaller DLQ's letters.
func TestReplayingALargeDLQHoldsOnlyWhatItKeeps(t *testing.T) {
	n := testsize.Count(t, "BOULEVARD_REPLAY_LETTERS", 10_000, 10_000)
	n = max(n, 4)
	n = min(n, MaxMemoryCapacity/4)
	for _, c := range []struct {
		name         string
		dryRun, keep bool
	}{
		{"replaying every letter", false, false},
		{"a dry run", true, false},
		{"a filter that keeps every letter", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var held [2]int64
			for i, size := range []int{n, 4 * n} {
				before, during := replayHeap(t, size, c.dryRun, c.keep)
				held[i] = int64(during) - int64(before)
				t.Logf("%d letters of 1 KiB: live heap %s before Replay, up to %s while it ran (%+d bytes a letter)",
					size, mib(before), mib(during), held[i]/int64(size))
			}
			if grew := held[1] - held[0]; grew > int64(3*n)*64 {
				t.Errorf("Replay of %d letters held %d bytes more than Replay of %d (%d bytes for each letter more): "+
					"its memory grows with the DLQ", 4*n, grew, n, grew/int64(3*n))
			}
		})
	}
}
