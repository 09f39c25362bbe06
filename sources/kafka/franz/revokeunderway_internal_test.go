package franz

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// lineWatch is a log handler that signals once a line with message msg
// is logged.
type lineWatch struct {
	msg  string
	once sync.Once
	seen chan struct{}
}

func (w *lineWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *lineWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, w.msg) {
		w.once.Do(func() { close(w.seen) })
	}
	return nil
}

func (w *lineWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *lineWatch) WithGroup(string) slog.Handler      { return w }

// Guarantee: when the group rebalances while the pipeline stops, the
// member's final commit of what it handled still lands. Close takes the
// member's claims and commits each on its release; a revoke of those
// partitions meanwhile (a heartbeat answered REBALANCE_IN_PROGRESS) must
// not let the client join the next generation before that commit is
// answered, or the commit carries a generation that is over and is
// refused. Here the final commit is held before it is sent until either
// the revoke says it waits for the release under way, or the member's
// JoinGroup reaches the cluster; every handled record must then be
// committed.
func TestRevokeWaitsForTheCommitOfAReleaseUnderWay(t *testing.T) {
	const topic, group, records = "events", "g-revoke-underway", 10
	c := groupCluster(t, topic, records)

	// The member's first commit (CommitInterval is an hour: the final one,
	// of Close's release) waits before it is sent.
	stalled, resume := holdFirstCommit(t)
	// Once rebalance is called, the next heartbeat is answered
	// REBALANCE_IN_PROGRESS (the client revokes, then joins again), and
	// the member's next JoinGroup closes joined.
	var rejoin atomic.Bool
	joined := make(chan struct{})
	rebalance := answerNextHeartbeat(c, group, kerr.RebalanceInProgress.Code, func() { rejoin.Store(true) })
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.JoinGroupRequest).Group == group && rejoin.CompareAndSwap(true, false) {
			close(joined)
		}
		return nil, nil, false
	})

	waits := &lineWatch{msg: revokeWaitsLog, seen: make(chan struct{})}
	_, stopped := stopWithCommitHeld(t, c, group, topic, RebalanceRange, records, slog.New(waits), stalled)
	rebalance()
	select {
	case <-waits.seen: // the revoke waits for the release
	case <-joined: // the client joins the next generation while the commit is held
	case <-time.After(wait.Deadline):
		t.Fatal("the member neither waited for its release nor joined again after the rebalance began")
	}
	resume()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	got := committedOffset(c, group, topic)
	if got != records {
		t.Fatalf("the group's committed offset is %d after the member handled %d records and stopped, want %d", got, records, records)
	}
}
