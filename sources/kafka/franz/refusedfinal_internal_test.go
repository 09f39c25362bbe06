package franz

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: a final commit of Close's release that the group refused as
// it rebalanced (REBALANCE_IN_PROGRESS) goes out again as soon as the
// client revokes the partition, in the generation the revoke holds it in,
// rather than when RevokeTimeout ends: the revoke waits for that release,
// so no later generation comes to send it in. Here Close's final commit
// is refused once, then the next heartbeat is answered
// REBALANCE_IN_PROGRESS; RevokeTimeout is a minute (the client's
// RebalanceTimeout two), and every handled record must be committed well
// before.
func TestFinalCommitRefusedByARebalanceGoesOutInTheRevokesGeneration(t *testing.T) {
	const topic, group, records = "events", "g-refused-final", 10
	c := groupCluster(t, topic, records)
	rebalance := answerNextHeartbeat(c, group, kerr.RebalanceInProgress.Code, nil)
	stopped := stopWithFinalCommitRefused(t, c, group, topic, records)
	rebalance()
	wait.For(t, "the final commit refused by the rebalance to land before RevokeTimeout", func() bool {
		return committedOffset(c, group, topic) == records
	}, func() string {
		return fmt.Sprintf("committed offset %d, want %d", committedOffset(c, group, topic), records)
	})
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// stopWithFinalCommitRefused runs a pipeline over a source of group
// (range, RevokeTimeout a minute, the client's RebalanceTimeout two) on
// c, with commits on an hourly interval, and stops it once it has handled
// topic's records records. The first commit, the final one of Close's
// release, is refused with REBALANCE_IN_PROGRESS. It returns once it has
// been, with the channel that receives Stop's error.
func stopWithFinalCommitRefused(t *testing.T, c *kfake.Cluster, group, topic string, records int64) <-chan error {
	t.Helper()
	refused := refuseFirstCommits(c, group, kerr.RebalanceInProgress.Code, 1)
	stalled, resume := holdFirstCommit(t)
	_, stopped := stopWithCommitHeld(t, c, group, topic, RebalanceRange, records, nil, stalled,
		func(o *Options) {
			o.RevokeTimeout = time.Minute
			o.ClientOptions = append(o.ClientOptions, kgo.RebalanceTimeout(2*time.Minute))
		})
	resume()
	wait.For(t, "the final commit to be refused", func() bool { return refused.Failed() == 1 })
	return stopped
}
