package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
)

// closeDeadline is the deadline deadlineClose gives Close, and
// closeMargin how much past its deadline and the member's leave grace
// (claimLeaveGrace, claim.LeaveGrace) Close may return: room for a busy
// machine, far below the retries of a sarama whose backoff the test sets
// to seconds.
const (
	closeDeadline   = 300 * time.Millisecond
	claimLeaveGrace = 500 * time.Millisecond
	closeMargin     = time.Second
)

// deadlineClose is a source whose Close runs with a context of
// closeDeadline, whatever the pipeline gives it, and sends how long it
// took on took.
type deadlineClose struct {
	testSource
	took chan time.Duration
}

func (s deadlineClose) Close(context.Context) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeDeadline)
	defer cancel()
	start := time.Now()
	err := s.testSource.Close(ctx)
	s.took <- time.Since(start)
	return err
}

// Guarantee: a member whose Close runs out of time while the group's
// coordinator holds one of the requests of the member's join (the
// coordinator lookup, the join, the sync, the lookup of its claims'
// committed offsets) returns within its deadline and the leave grace:
// Close cuts the connections, which fails the held request at once, and
// sarama's retries of the lookups, which then fail at once too, do not
// sleep their backoff (Metadata.Retry, here 1s: nine sleeps for the
// committed offsets, three for each coordinator lookup) once the
// member's connections are cut.
func TestACloseWhileTheCoordinatorHoldsTheJoinReturnsByItsDeadline(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetFetch} {
		t.Run(key.Name(), func(t *testing.T) {
			c := newCluster(t, 1)
			held := testbroker.HoldFirst(t, c, key)
			opts := sourceOptions(c, "g-held-"+key.Name())
			cfg := *opts.Config
			cfg.Metadata.Retry.Backoff = time.Second
			opts.Config = &cfg
			src := deadlineClose{newSource(t, opts), make(chan time.Duration, 1)}
			p := startHeld(t, pipelineOpts("held-"+key.Name(), src, 1, newLedger(), nil), held,
				fmt.Sprintf("the member never sent a %s request", key.Name()))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
			took := <-src.took
			t.Logf("Close took %v with a deadline of %v", took.Round(time.Millisecond), closeDeadline)
			if limit := closeDeadline + claimLeaveGrace + closeMargin; took > limit {
				t.Fatalf("Close took %v with a deadline of %v while the coordinator held the %s request; want at most %v",
					took.Round(time.Millisecond), closeDeadline, key.Name(), limit)
			}
		})
	}
}
