package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// commitRequest is one OffsetCommit request of a group, as the broker
// received it.
type commitRequest struct {
	member    string
	gen       int32
	offs      map[int32]int64 // partition -> offset
	version   int16
	retention int64   // RetentionTimeMillis
	instance  *string // InstanceID
}

// commitRecorder keeps a group's OffsetCommit requests in arrival order.
type commitRecorder struct {
	mu   sync.Mutex
	reqs []commitRequest
}

func recordCommits(c *kfake.Cluster, group string) *commitRecorder {
	cr := &commitRecorder{}
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		got := commitRequest{member: r.MemberID, gen: r.Generation, offs: map[int32]int64{},
			version: r.Version, retention: r.RetentionTimeMillis, instance: r.InstanceID}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == testTopic {
					got.offs[rp.Partition] = rp.Offset
				}
			}
		}
		cr.mu.Lock()
		cr.reqs = append(cr.reqs, got)
		cr.mu.Unlock()
		return nil, nil, false
	})
	return cr
}

// since returns the requests of member from the i-th request of the group
// on.
func (cr *commitRecorder) since(i int, member string) []commitRequest {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	var out []commitRequest
	for _, r := range cr.reqs[min(i, len(cr.reqs)):] {
		if r.member == member {
			out = append(out, r)
		}
	}
	return out
}

func (cr *commitRecorder) len() int {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return len(cr.reqs)
}

// backwards returns, for the first partition whose offset a request
// carries lower than an earlier request did, a description; "" when none.
func (cr *commitRecorder) backwards() string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	high := map[int32]int64{}
	for i, r := range cr.reqs {
		for p, o := range r.offs {
			if h, ok := high[p]; ok && o < h {
				return fmt.Sprintf("request %d (generation %d) carries partition %d at %d, after %d", i, r.gen, p, o, h)
			}
			high[p] = max(high[p], o)
		}
	}
	return ""
}

// rebalanceRefusal is what refuseCommitsDuringRebalance saw.
type rebalanceRefusal struct {
	logs logBook
	// A's log lines while the rebalance held its commits off, and once
	// every record was committed after it.
	heldLines, endLines []logRecord
	commits             *commitRecorder
	ends                map[int32]int64 // every record handled, per partition
	kept                []int32         // the partitions A kept across the rebalance
	refused             []commitRequest // A's commit requests while the rebalance held them off
	stats               kafka.MemberStats
}

// refuseCommitsDuringRebalance runs member A (pipeline "a", cooperative
// sticky, committing every 20ms) alone on 4 partitions, none led by the
// group's coordinator, until it has committed the first 100 records of
// each, then lets member B join. The broker holds every SyncGroup of that
// rebalance (the group stays in CompletingRebalance, its new generation
// set). Once it holds both members', 10 more records per partition are
// produced and A handles them, until A has sent at least 3 commits, all of
// which the broker refuses (sarama sends the generation that ended,
// ILLEGAL_GENERATION; franz-go the one being completed,
// REBALANCE_IN_PROGRESS). It then lets the rebalance end and waits for the
// group to commit every record (no record is produced after).
func refuseCommitsDuringRebalance(t *testing.T, cl client) rebalanceRefusal {
	t.Helper()
	const parts = 4
	group := "g-refused-" + cl.name
	c := newCluster(t, parts)
	leadAwayFromCoordinator(t, c, group, parts)
	r := rebalanceRefusal{logs: newLogBook()}
	r.commits = recordCommits(c, group)

	var (
		holding atomic.Bool
		heldMu  sync.Mutex
		held    = map[string]bool{} // the members whose SyncGroup is held
	)
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { holding.Store(false); close(release) })
	c.ControlKey(int16(kmsg.SyncGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		sg := req.(*kmsg.SyncGroupRequest)
		if sg.Group != group || !holding.Load() {
			return nil, nil, false
		}
		heldMu.Lock()
		held[sg.MemberID] = true
		heldMu.Unlock()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})

	opts := sourceOptions(c, group)
	opts.Rebalance = kafka.RebalanceCooperativeSticky
	opts.CommitInterval = 20 * time.Millisecond
	aopts := opts
	aopts.Logger = r.logs.logger()
	l := newLedger()
	asrc := cl.new(t, aopts)
	a := startPipeline(t, pipelineOpts("a", asrc, 1, l, nil))
	defer stopPipeline(t, a)
	first := produce(t, c, parts, 0, parts*100)
	wait.Within(t, 20*time.Second, "A to commit the first records", func() bool { return equalOffsets(committed(c, group), first) })
	aID := onlyMember(t, asrc).MemberID

	holding.Store(true)
	b := startPipeline(t, pipelineOpts("b", cl.new(t, opts), 1, newLedger(), nil))
	defer stopPipeline(t, b)
	defer releaseOnce() // before the stops, if the test ends early
	wait.Within(t, 20*time.Second, "both members' SyncGroups held", func() bool {
		heldMu.Lock()
		defer heldMu.Unlock()
		return len(held) == 2
	})
	from := r.commits.len()
	r.ends = produce(t, c, parts, parts*100, parts*10)
	for p := range r.ends {
		r.ends[p] += 100
	}
	wait.Within(t, 20*time.Second, "A to handle the records produced during the rebalance", func() bool { return l.covers(r.ends) })
	carriesNew := func(req commitRequest) bool {
		for p, o := range req.offs {
			if o == r.ends[p] {
				return true
			}
		}
		return false
	}
	wait.Within(t, 20*time.Second, "A's commits of those records during the rebalance", func() bool {
		reqs := r.commits.since(from, aID)
		return len(reqs) >= 3 && carriesNew(reqs[len(reqs)-1])
	})
	r.refused = r.commits.since(from, aID)
	r.heldLines = r.logs.records()
	releaseOnce()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gi, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
		return gi != nil && len(gi.Members) == 2 && gi.NumAssigned() == parts &&
			gi.Members[0].NumAssigned() > 0 && gi.Members[1].NumAssigned() > 0
	})
	if err != nil {
		t.Fatalf("the group did not settle on A and B: %v", err)
	}
	for _, m := range gi.Members {
		if m.MemberID == aID {
			r.kept = m.Assignment[testTopic]
		}
	}
	wait.Within(t, 20*time.Second, "every handled record committed after the rebalance",
		func() bool { return equalOffsets(committed(c, group), r.ends) },
		func() string { return fmt.Sprintf("committed %v, handled %v", committed(c, group), r.ends) })
	r.endLines = r.logs.records()
	r.stats = onlyMember(t, asrc)
	return r
}

// leadAwayFromCoordinator moves the leadership of every partition of
// testTopic off the broker that coordinates group. sarama sends a client's
// requests to one broker one at a time, on one connection: while the
// broker holds the member's JoinGroup or SyncGroup (as a test holding a
// rebalance does), the member fetches nothing from that broker. Its
// commits go on, on a connection of their own.
func leadAwayFromCoordinator(t *testing.T, c *kfake.Cluster, group string, parts int32) {
	t.Helper()
	coord := c.CoordinatorFor(group)
	var others []int32 // newCluster's brokers are nodes 0, 1 and 2
	for n := range int32(len(c.ListenAddrs())) {
		if n != coord {
			others = append(others, n)
		}
	}
	for p := range parts {
		if c.LeaderFor(testTopic, p) != coord {
			continue
		}
		if err := c.MoveTopicPartition(testTopic, p, others[int(p)%len(others)]); err != nil {
			t.Fatalf("moving partition %d off the coordinator (node %d): %v", p, coord, err)
		}
	}
}

// Guarantee: under cooperative-sticky, the handled offsets of the
// partitions a member keeps, whose commits the broker refused while the
// group rebalanced, are committed (in the new generation) once the
// rebalance ends, even when no record comes after them; no commit request of
// the group carries a partition's offset lower than an earlier one did (no
// offset goes backwards across the rebalance).
func TestKeptPartitionsCommitWhatTheRebalanceRefused(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		r := refuseCommitsDuringRebalance(t, cl)
		if len(r.kept) == 0 {
			t.Fatal("A kept no partition across the rebalance")
		}
		if r.stats.CommitErrors < int64(len(r.refused)) {
			t.Fatalf("A counts %d failed commits, want at least the %d the rebalance refused", r.stats.CommitErrors, len(r.refused))
		}
		refusal := cl.brokerErr(kerr.IllegalGeneration)
		if cl.name == franzClient.name {
			refusal = cl.brokerErr(kerr.RebalanceInProgress)
		}
		if ce := r.stats.LastCommitError; ce == nil || !errors.Is(ce, refusal) {
			t.Fatalf("A's last commit error %v, want %v", ce, refusal)
		}
		if s := r.commits.backwards(); s != "" {
			t.Fatalf("a commit went backwards: %s", s)
		}
	})
}

// Guarantee: the commits the broker refuses because the group rebalances
// (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS) cost at most one log line at
// INFO or above per rebalance, and none at WARN or above: an expected
// refusal raises no warning.
func TestCommitsRefusedByARebalanceLogOneLineBelowWarn(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		r := refuseCommitsDuringRebalance(t, cl)
		commitLines := func(recs []logRecord, level slog.Level) []string {
			var out []string
			for _, rec := range recs {
				if rec.Level >= level && strings.Contains(rec.Msg, "commit") {
					out = append(out, rec.Level.String()+" "+rec.Text)
				}
			}
			return out
		}
		if lines := commitLines(r.heldLines, slog.LevelInfo); len(lines) > 1 {
			t.Fatalf("%d commits refused in one rebalance logged %d lines at INFO or above, want at most 1:\n%s",
				len(r.refused), len(lines), strings.Join(lines, "\n"))
		}
		if lines := commitLines(r.endLines, slog.LevelWarn); len(lines) > 0 {
			t.Fatalf("commits refused by a rebalance logged %d lines at WARN or above, want none:\n%s",
				len(lines), strings.Join(lines, "\n"))
		}
	})
}
