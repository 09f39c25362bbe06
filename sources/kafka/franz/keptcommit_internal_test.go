package franz

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: under a cooperative strategy, a rebalance that leaves the
// member its partition while Close is releasing it does not cost the
// final commit: franz-go revokes nothing the member keeps, so nothing
// holds the rebalance for the release, and a commit sent while the group
// completes the rebalance is refused (REBALANCE_IN_PROGRESS, or
// ILLEGAL_GENERATION with the generation that ended). The member still
// owns the partition: the commit goes out again once the member has
// joined the group's next generation. Here the final commit is held
// before it is sent until the member, joining again after a heartbeat
// answered REBALANCE_IN_PROGRESS, sends its SyncGroup; the cluster holds
// that SyncGroup until the commit has been refused. Every handled record
// must then be committed.
func TestFinalCommitOfAKeptPartitionLandsAfterACooperativeRebalance(t *testing.T) {
	const topic, group, records = "events", "g-kept-commit", 10
	c := groupCluster(t, topic, records)

	// The member's first commit (CommitInterval is an hour: the final one,
	// of Close's release) waits before it is sent.
	stalled, resume := holdFirstCommit(t)
	rebalance := answerNextHeartbeat(c, group, kerr.RebalanceInProgress.Code, nil)
	// The member's SyncGroup of the next generation closes syncing (the
	// member has that generation by then), then waits until a commit
	// failure is logged (or the test ends).
	refused := &lineWatch{msg: "kafka commit failed", seen: make(chan struct{})}
	syncing, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	var held atomic.Bool
	c.ControlKey(int16(kmsg.SyncGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.SyncGroupRequest)
		if r.Group != group || r.Generation <= 1 || !held.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		close(syncing)
		c.SleepControl(func() {
			select {
			case <-refused.seen:
			case <-done:
			}
		})
		return nil, nil, false
	})
	var mu sync.Mutex
	var gens []int32
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r := req.(*kmsg.OffsetCommitRequest); r.Group == group {
			mu.Lock()
			gens = append(gens, r.Generation)
			mu.Unlock()
		}
		return nil, nil, false
	})

	m, stopped := stopWithCommitHeld(t, c, group, topic, RebalanceCooperativeSticky, records, slog.New(refused), stalled)
	rebalance()
	select {
	case <-syncing:
	case <-time.After(wait.Deadline):
		t.Fatal("the member never joined the group's next generation")
	}
	if _, gen := m.client().GroupMetadata(); gen <= 1 {
		t.Fatalf("the member syncs generation %d, want a later one than 1", gen)
	}
	resume()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case <-refused.seen:
	default:
		t.Fatal("the final commit sent while the group completed its rebalance was not refused")
	}
	got := committedOffset(c, group, topic)
	mu.Lock()
	defer mu.Unlock()
	if got != records {
		t.Fatalf("the group's committed offset is %d after the member handled %d records and stopped, want %d (commits of generations %v)",
			got, records, records, gens)
	}
}
