package franz

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
)

// Guarantee: a member whose Close runs out of time while the group's
// coordinator holds one of its requests (the coordinator lookup, the
// join, the sync, the lookup of its committed offsets, a heartbeat, a
// commit, the leave) returns within its deadline and the leave grace:
// Close's deadline ends the client's context, which gives up the held
// request and franz-go's leave, and the member's own leave past the
// deadline waits the grace at most. franz-go's retry backoff is set to
// ten seconds here, so that a retry sleeping past the deadline would show.
func TestACloseWhileTheCoordinatorHoldsARequestReturnsByItsDeadline(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetFetch,
		kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			const topic = "events"
			group := "g-held-" + key.Name()
			c := groupCluster(t, topic, 3)
			held := testbroker.HoldFirst(t, c, key)
			member := groupSource(t, c, topic, group, func(o *Options) {
				o.CommitInterval = 50 * time.Millisecond
				o.ClientOptions = append(o.ClientOptions, kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Second }))
			})
			src := testbroker.ClosingByDeadline[[]byte](member)
			p := runPipeline(t, "held-"+key.Name(), src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil })
			if key == kmsg.LeaveGroup {
				// Only Close leaves.
				wait.For(t, "the member to claim its partition", func() bool {
					ms := member.Stats().Members
					return len(ms) == 1 && len(ms[0].Partitions) == 1
				}, func() string { return fmt.Sprintf("stats %+v", member.Stats()) })
			} else {
				select {
				case <-held:
				case <-time.After(wait.Deadline):
					t.Fatalf("the member never sent a %s request", key.Name())
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
			took := <-src.Took
			select {
			case <-held:
			default:
				t.Fatalf("the member never sent a %s request", key.Name())
			}
			t.Logf("Close took %v with a deadline of %v", took.Round(time.Millisecond), testbroker.CloseDeadline)
			if limit := testbroker.CloseDeadline + claim.LeaveGrace + testbroker.CloseMargin; took > limit {
				t.Fatalf("Close took %v with a deadline of %v while the coordinator held the %s request; want at most %v",
					took.Round(time.Millisecond), testbroker.CloseDeadline, key.Name(), limit)
			}
		})
	}
}
