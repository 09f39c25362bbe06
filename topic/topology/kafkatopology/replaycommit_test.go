package kafkatopology

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a Replay on Kafka settles each letter of the DLQ as it
// handles it, those it keeps (put back on the DLQ) as well as those it
// replays, so that the DLQ's consumer group commits, while Replay runs,
// every letter it has handled: a Replay that dies midway (its process
// killed) leaves to the DLQ's next reader the letters it had not
// handled, and none it replayed is delivered from the DLQ again. Here
// the filter keeps the first of six letters and replays the others;
// while it is offered the last, the group's committed offset reaches
// that letter's; a dry run afterwards sees the kept letter alone, once.
func TestAReplayOnKafkaCommitsEveryLetterItHandledWhileItRuns(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("commits").DLQ())
	death := &topology.Death{Reason: topology.ReasonRejected, Topic: "commits", Group: q.Topology().ConsumerGroup()}
	const n = 6
	for i := range n {
		if err := q.DeadLetter(t.Context(), topology.Letter[msg]{Value: msg{N: i}, Death: death}); err != nil {
			t.Fatal(err)
		}
	}
	dlq := q.(*queues[msg]).dlq
	admin := testbroker.Admin(t, c.ListenAddrs())
	rep, err := topology.Replay(t.Context(), q, topology.ReplayOptions[msg]{Filter: func(l *topology.Letter[msg]) bool {
		if l.Value.N == n-1 {
			var committed map[int32]int64
			wait.Within(t, 10*time.Second, "the DLQ's group to commit the letters Replay handled before the last", func() bool {
				committed = testbroker.Committed(t, admin, dlq, dlq+":dead")
				return committed[0] >= n-1
			}, func() string { return fmt.Sprintf("committed %v, want offset %d on partition 0", committed, n-1) })
		}
		return l.Value.N != 0
	}})
	if err != nil || rep.ReplayedCount != n-1 || rep.Kept != 1 {
		t.Fatalf("Replay = %d replayed, %d kept, %v; want %d and 1", rep.ReplayedCount, rep.Kept, err, n-1)
	}
	dry, err := topology.Replay(t.Context(), q, topology.ReplayOptions[msg]{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	for _, l := range dry.Replayed {
		seen = append(seen, l.Value.N)
	}
	if !slices.Equal(seen, []int{0}) || dry.Kept != 1 {
		t.Errorf("a dry run afterwards sees %v (%d kept), want the kept letter alone: [0]", seen, dry.Kept)
	}
}
