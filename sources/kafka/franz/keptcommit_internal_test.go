package franz

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
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
	refused := &lineWatch{msg: claim.FinalRefusedLog, seen: make(chan struct{})}
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
	mu.Lock()
	defer mu.Unlock()
	wantAllCommitted(t, committedOffset(c, group, topic), records, gens)
}

// Guarantee: under a cooperative strategy, a final commit that carries the
// generation the group has just left (the group's next JoinGroup answer
// came after the commit was sent) is refused with ILLEGAL_GENERATION, and
// goes out again once the member has synced the next generation, which
// still gives it the partition: every handled record is committed.
func TestFinalCommitRefusedForAnEndedGenerationLandsInTheNext(t *testing.T) {
	const group, records = "g-ended-generation", 10
	m, got, gens, _ := stopWithFinalCommitOfAnEndedGeneration(t, group, records)
	if ce := m.Stats().LastCommitError; ce == nil || !errors.Is(ce.Err, kerr.IllegalGeneration) {
		t.Fatalf("the member's last commit error is %v, want the final commit refused with ILLEGAL_GENERATION", ce)
	}
	wantAllCommitted(t, got, records, gens)
}

// Guarantee: a final commit the group refused as it rebalanced and that
// then lands in the next generation is no loss, so its refusal is logged
// below WARN, saying it goes out again, and no WARN line tells of a
// failed commit.
func TestFinalCommitRefusedThenLandedLogsNoWarning(t *testing.T) {
	const group, records = "g-refused-quiet", 10
	_, got, gens, lines := stopWithFinalCommitOfAnEndedGeneration(t, group, records)
	wantAllCommitted(t, got, records, gens)
	var warned []string
	for _, l := range lines.Matching("level=WARN") {
		if strings.Contains(l, "commit") {
			warned = append(warned, l)
		}
	}
	if len(warned) > 0 {
		t.Errorf("a final commit that landed after its refusal logged WARN lines:\n%s", strings.Join(warned, ""))
	}
	if got := lines.Matching(claim.FinalRefusedLog); len(got) != 1 || strings.Contains(got[0], "level=WARN") {
		t.Errorf("want one line below WARN saying the refused final commit goes out again, got %q", got)
	}
}

// stopWithFinalCommitOfAnEndedGeneration runs a pipeline over a source of
// group (cooperative-sticky, logging at DEBUG to lines) on a one-partition
// topic of records records, waits until it has handled them all, and
// stops it. The member's final commit reaches the cluster with the
// group's first generation, and the cluster holds it until the member,
// joining again after a heartbeat answered REBALANCE_IN_PROGRESS, sends
// its SyncGroup of the next generation: the group has moved on by then.
// It returns, once the pipeline has stopped, the member, the group's
// committed offset, the generations of the member's commits, and the
// lines logged.
func stopWithFinalCommitOfAnEndedGeneration(t *testing.T, group string, records int) (m *member, committed int64, gens []int32, lines *logtest.Lines) {
	t.Helper()
	const topic = "events"
	c := groupCluster(t, topic, records)
	stalled, resume := holdFirstCommit(t)
	rebalance := answerNextHeartbeat(c, group, kerr.RebalanceInProgress.Code, nil)
	syncing, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	var synced sync.Once
	c.ControlKey(int16(kmsg.SyncGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r := req.(*kmsg.SyncGroupRequest); r.Group == group && r.Generation > 1 {
			synced.Do(func() { close(syncing) })
		}
		return nil, nil, false
	})
	// The member's first commit closes sent and waits until the member
	// syncs the next generation; the cluster then answers it.
	sent := make(chan struct{})
	var first atomic.Bool
	var mu sync.Mutex
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		mu.Lock()
		gens = append(gens, r.Generation)
		mu.Unlock()
		if first.CompareAndSwap(false, true) {
			close(sent)
			c.SleepControl(func() {
				select {
				case <-syncing:
				case <-done:
				}
			})
		}
		return nil, nil, false
	})

	lines = new(logtest.Lines)
	log := slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, stopped := stopWithCommitHeld(t, c, group, topic, RebalanceCooperativeSticky, int64(records), log, stalled)
	resume()
	select {
	case <-sent:
	case <-time.After(wait.Deadline):
		t.Fatal("the member's final commit never reached the cluster")
	}
	rebalance()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return m, committedOffset(c, group, topic), slices.Clone(gens), lines
}

// Guarantee: a final commit the group refused as it rebalanced, whose
// member's session does not move on before RevokeTimeout ends the wait
// for the next generation, is given up with one WARN line, after the
// line below WARN that said it would go out again.
func TestFinalCommitRefusedAndNotSentAgainWarnsOnce(t *testing.T) {
	const topic, group, records = "events", "g-refused-given-up", 10
	c := groupCluster(t, topic, records)
	stalled, resume := holdFirstCommit(t)
	// Every commit of the group is refused; the group never moves on.
	testbroker.Inject(c, kmsg.OffsetCommit, kerr.RebalanceInProgress.Code, testbroker.CommitsOf(group)).Every(1)
	lines := new(logtest.Lines)
	log := slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, stopped := stopWithCommitHeld(t, c, group, topic, RebalanceCooperativeSticky, records, log, stalled)
	resume()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	lines.Want(t, 1, "the refusal said to go out again", claim.FinalRefusedLog)
	lines.Want(t, 1, "the WARN line of the commit given up", "level=WARN", "commit", "REBALANCE_IN_PROGRESS")
	all := lines.All()
	refusal := slices.IndexFunc(all, func(l string) bool { return strings.Contains(l, claim.FinalRefusedLog) })
	if warned := slices.IndexFunc(all, func(l string) bool { return strings.Contains(l, "level=WARN") }); warned < refusal {
		t.Errorf("the WARN line came before the refusal's:\n%s", strings.Join(all, ""))
	}
}

// wantAllCommitted fails t unless the group's committed offset (got) is
// records, all that the member handled before it stopped; gens are the
// generations of its commits.
func wantAllCommitted(t *testing.T, got int64, records int, gens []int32) {
	t.Helper()
	if got != int64(records) {
		t.Fatalf("the group's committed offset is %d after the member handled %d records and stopped, want %d (commits of generations %v)",
			got, records, records, gens)
	}
}
