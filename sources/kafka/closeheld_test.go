package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// claimLeaveGrace is claim.LeaveGrace, the member's leave grace past
// its Close's deadline.
const claimLeaveGrace = 500 * time.Millisecond

// Guarantee: a member whose Close runs out of time while the group's
// coordinator holds one of the member's requests (the coordinator
// lookup, the join, the sync, the lookup of its claims' committed
// offsets, a heartbeat, a commit, the leave) returns within its deadline
// and the leave grace: Close cuts the connections, which fails the held
// request at once, and sarama's retries of the lookups, which then fail
// at once too, do not sleep their backoff (Metadata.Retry, here 10s:
// nine sleeps for the committed offsets, three for each coordinator
// lookup) once the member's connections are cut. The requests the cut
// fails, the held one too, are logged at Debug, not above: Close reports
// its deadline itself.
func TestACloseWhileTheCoordinatorHoldsARequestReturnsByItsDeadline(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetFetch,
		kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			c := newCluster(t, 1)
			held := testbroker.HoldFirst(t, c, key)
			opts := sourceOptions(c, "g-held-"+key.Name())
			cfg := *opts.Config
			cfg.Metadata.Retry.Backoff = 10 * time.Second
			opts.Config = &cfg
			book := newLogBook()
			opts.Logger = book.logger()
			member := newSource(t, opts)
			src := testbroker.ClosingByDeadline(member)
			po := pipelineOpts("held-"+key.Name(), src, 1, newLedger(), nil)
			// Far past the limit below, yet short enough that a Close
			// which does not return fails the test rather than hanging it.
			po.ShutdownTimeout = 20 * time.Second
			if key == kmsg.OffsetCommit {
				// A commit goes out once a record was handled.
				produce(t, c, 1, 0, 3)
			}
			p := startPipeline(t, po)
			claimed := func() bool {
				ms := member.Stats().Members
				return len(ms) == 1 && len(ms[0].Partitions) == 1
			}
			if !testbroker.AwaitHeld(t, key, held, claimed, func() string { return fmt.Sprintf("stats %+v", member.Stats()) }) {
				stopPipeline(t, p)
				t.Fatalf("the member never sent a %s request", key.Name())
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stopErr := p.Stop(ctx)
			var took time.Duration
			select {
			case took = <-src.Took:
			case <-time.After(wait.Deadline):
				t.Fatalf("Close still runs %v after the pipeline's Stop returned %v, while the coordinator holds the %s request",
					wait.Deadline, stopErr, key.Name())
			}
			if stopErr != nil {
				t.Errorf("stop: %v", stopErr)
			}
			select {
			case <-held:
			case <-time.After(wait.Deadline):
				// The cut may end Close before the cluster reads a
				// request the member wrote just before it.
				t.Fatalf("the member never sent a %s request (none reached the cluster within %v)", key.Name(), wait.Deadline)
			}
			// A request failed by the member's own cut is logged at Debug.
			if warned := book.find(func(r logRecord) bool {
				return r.Level > slog.LevelDebug && strings.Contains(r.Msg, "closed with an error")
			}); len(warned) > 0 {
				t.Errorf("Close past its deadline logged %+v; want the requests its cut failed at Debug", warned)
			}
			t.Logf("Close took %v with a deadline of %v", took.Round(time.Millisecond), testbroker.CloseDeadline)
			if limit := testbroker.CloseDeadline + claimLeaveGrace + testbroker.CloseMargin; took > limit {
				t.Fatalf("Close took %v with a deadline of %v while the coordinator held the %s request; want at most %v",
					took.Round(time.Millisecond), testbroker.CloseDeadline, key.Name(), limit)
			}
		})
	}
}

// Guarantee: a source closed directly, with a short deadline, while its
// handlers still hold messages it delivered (a pipeline's stop drains
// first; a caller of Close need not) returns by that deadline and the
// leave grace, not after RevokeTimeout (30s here): the deadline ends the
// partitions' wait for their messages in flight, which will be delivered
// again.
func TestACloseWithMessagesInFlightReturnsByItsDeadline(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1)
		produce(t, c, 1, 0, 3)
		opts := sourceOptions(c, "g-held-messages")
		opts.RevokeTimeout = 30 * time.Second
		opts.Config.Consumer.Group.Rebalance.Timeout = time.Minute // above RevokeTimeout
		src := cl.new(t, opts)
		held, release := make(chan struct{}), make(chan struct{})
		var holding sync.Once
		p := startPipeline(t, pipelineOpts("held-messages", src, 1, newLedger(), func(*message.Message[[]byte]) error {
			holding.Do(func() { close(held) })
			<-release
			return nil
		}))
		defer stopPipeline(t, p)
		defer close(release) // before the stop, which drains
		select {
		case <-held:
		case <-time.After(wait.Deadline):
			t.Fatalf("no message reached the handler within %v; stats %+v", wait.Deadline, src.Stats())
		}
		ctx, cancel := context.WithTimeout(context.Background(), testbroker.CloseDeadline)
		defer cancel()
		start := time.Now()
		err := src.Close(ctx)
		took := time.Since(start)
		if err != nil {
			t.Errorf("Close with messages in flight = %v, want nil", err)
		}
		t.Logf("Close took %v with a deadline of %v", took.Round(time.Millisecond), testbroker.CloseDeadline)
		if limit := testbroker.CloseDeadline + claimLeaveGrace + testbroker.CloseMargin; took > limit {
			t.Fatalf("Close took %v with a deadline of %v while a handler held a message in flight (RevokeTimeout %v); want at most %v",
				took.Round(time.Millisecond), testbroker.CloseDeadline, opts.RevokeTimeout, limit)
		}
	})
}
