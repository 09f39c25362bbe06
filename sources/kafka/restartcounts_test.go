package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a stage's Rebalances and Commits (and so the exported
// kafka_rebalances_total and kafka_commits_total) never go down when its
// member fails and the stage's Run starts a new one: the new member's
// counts go on from those of the member gone.
func TestAStageCountsDoNotGoDownWhenItsMemberFailsAndRestarts(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const group = "g-restart-counts"
		c := newCluster(t, 2)
		f := failGroup(c, group)
		produce(t, c, 2, 0, 20)
		src := cl.new(t, sourceOptions(c, group))
		l := newLedger()
		p := startPipeline(t, pipelineOpts("restartcounts", src, 1, l, nil))
		defer stopPipeline(t, p)

		var last kafka.MemberStats
		member := func() (kafka.MemberStats, bool) {
			st := src.Stats()
			if len(st.Members) != 1 {
				return kafka.MemberStats{}, false
			}
			m := st.Members[0]
			if m.Commits < last.Commits || m.Rebalances < last.Rebalances || m.CommitErrors < last.CommitErrors {
				t.Fatalf("a stage's counts went down: %+v after %+v", m, last)
			}
			last = m
			return m, true
		}
		wait.Within(t, 30*time.Second, "the first member's commits", func() bool {
			m, ok := member()
			return ok && m.Commits > 0 && l.covers(map[int32]int64{0: 10, 1: 10})
		})
		before := last
		if err := f.fail(context.Background()); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, 60*time.Second, "a new member after the restart", func() bool {
			_, ok := member()
			return ok && p.Stats().Producers[0].Restarts > 0 && last.MemberID != before.MemberID && last.MemberID != ""
		})
		produce(t, c, 2, 20, 20)
		wait.Within(t, 60*time.Second, "the new member's commits", func() bool {
			m, ok := member()
			return ok && m.Commits > before.Commits && l.covers(map[int32]int64{0: 20, 1: 20})
		})
		if last.Rebalances <= before.Rebalances {
			t.Fatalf("Rebalances %d after the restart, want more than the %d before", last.Rebalances, before.Rebalances)
		}
	})
}
