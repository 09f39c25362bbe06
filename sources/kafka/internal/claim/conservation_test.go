package claim

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: under FailureCommit, a claim whose records' outcomes arrive
// in a seeded random order and chunking, a third of them failed (by
// default, or discarded by a hook), counts each record once: its
// partition's stats never show InFlight growing, Marked going back or
// FailedCommitted going down, nor more failures committed past than
// failed by default so far; once every outcome arrived nothing is in
// flight, everything is marked, and FailedCommitted is the number of
// records failed by default, the discarded ones left out.
func TestClaimStatsAddUpWithOutcomesInAnyOrder(t *testing.T) {
	const n = 300
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 2))
		m := NewMember("g", "s", slog.New(slog.DiscardHandler), false)
		m.NoteSession("m1", 1, nil)
		c, _ := newTestPartition(FailureCommit, n)
		c.MemberID, c.Generation = "m1", 1
		m.Add(c)
		order := rng.Perm(n)
		prev := m.Stats().Partitions[0]
		var failedByDefault int64
		for len(order) > 0 {
			k := min(1+rng.IntN(8), len(order))
			var ok, failed []acker.Outcome
			for _, id := range order[:k] {
				o := acker.Outcome{ID: uint64(id)}
				switch rng.IntN(6) {
				case 0:
					o.Err = errors.New("failed")
					failedByDefault++
					failed = append(failed, o)
				case 1:
					o.Err, o.Disposition = errors.New("failed"), acker.DispositionDiscard
					failed = append(failed, o)
				default:
					ok = append(ok, o)
				}
			}
			order = order[k:]
			c.Ack(context.Background(), ok, failed)
			ps := m.Stats().Partitions[0]
			if ps.InFlight > prev.InFlight || ps.Marked < prev.Marked || ps.FailedCommitted < prev.FailedCommitted || ps.FailedCommitted > failedByDefault {
				t.Fatalf("seed %d: %+v after %+v, with %d failed by default so far", seed, ps, prev, failedByDefault)
			}
			prev = ps
		}
		if prev.InFlight != 0 || prev.Marked != n || prev.FailedCommitted != failedByDefault {
			t.Errorf("seed %d: once every outcome arrived: in flight %d, marked %d, failed committed past %d; want 0, %d, %d",
				seed, prev.InFlight, prev.Marked, prev.FailedCommitted, n, failedByDefault)
		}
	}
}
