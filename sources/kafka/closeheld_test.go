package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
)

// claimLeaveGrace is claim.LeaveGrace, the member's leave grace past
// its Close's deadline.
const claimLeaveGrace = 500 * time.Millisecond

// Guarantee: a member whose Close runs out of time while the group's
// coordinator holds one of the requests of the member's join (the
// coordinator lookup, the join, the sync, the lookup of its claims'
// committed offsets) returns within its deadline and the leave grace:
// Close cuts the connections, which fails the held request at once, and
// sarama's retries of the lookups, which then fail at once too, do not
// sleep their backoff (Metadata.Retry, here 10s: nine sleeps for the
// committed offsets, three for each coordinator lookup) once the
// member's connections are cut.
func TestACloseWhileTheCoordinatorHoldsTheJoinReturnsByItsDeadline(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetFetch} {
		t.Run(key.Name(), func(t *testing.T) {
			c := newCluster(t, 1)
			held := testbroker.HoldFirst(t, c, key)
			opts := sourceOptions(c, "g-held-"+key.Name())
			cfg := *opts.Config
			cfg.Metadata.Retry.Backoff = 10 * time.Second
			opts.Config = &cfg
			src := testbroker.ClosingByDeadline(newSource(t, opts))
			p := startHeld(t, pipelineOpts("held-"+key.Name(), src, 1, newLedger(), nil), held,
				fmt.Sprintf("the member never sent a %s request", key.Name()))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
			took := <-src.Took
			t.Logf("Close took %v with a deadline of %v", took.Round(time.Millisecond), testbroker.CloseDeadline)
			if limit := testbroker.CloseDeadline + claimLeaveGrace + testbroker.CloseMargin; took > limit {
				t.Fatalf("Close took %v with a deadline of %v while the coordinator held the %s request; want at most %v",
					took.Round(time.Millisecond), testbroker.CloseDeadline, key.Name(), limit)
			}
		})
	}
}
