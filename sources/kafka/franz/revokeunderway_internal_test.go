package franz

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
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
	src, err := New(Options{
		Brokers:        c.ListenAddrs(),
		GroupID:        group,
		Topics:         []string{topic},
		InitialOffset:  OffsetEarliest,
		Rebalance:      RebalanceRange,
		CommitInterval: time.Hour,
		RevokeTimeout:  2 * time.Second,
		Logger:         slog.New(waits),
		ClientOptions:  fastGroup(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:            "revoke-underway",
		ShutdownTimeout: 20 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				handled.Add(1)
				return m.Data, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	marked := func() int64 {
		for _, ms := range src.Stats().Members {
			for _, ps := range ms.Partitions {
				return ps.Marked
			}
		}
		return -1
	}
	wait.For(t, "every record handled and marked for commit", func() bool { return marked() == records },
		func() string { return fmt.Sprintf("%d handled, marked %d", handled.Load(), marked()) })

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- p.Stop(ctx)
	}()
	select {
	case <-stalled:
	case <-time.After(wait.Deadline):
		t.Fatal("the stopping member never committed")
	}
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
	var got int64 = -1
	if gi := c.GroupInfo(group); gi != nil {
		if oc, ok := gi.Commits[topic][0]; ok {
			got = oc.Offset
		}
	}
	if got != records {
		t.Fatalf("the group's committed offset is %d after the member handled %d records and stopped, want %d", got, records, records)
	}
}
