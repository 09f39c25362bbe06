package franz

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: a final commit of Close's release that the group refused as
// it rebalanced, and that waits to go out again in the member's next
// generation, is given up as soon as the member loses the partition: its
// offsets may be another member's by then, and Close does not wait out
// RevokeTimeout for a generation that would not send it. Here Close's
// final commit is refused once (REBALANCE_IN_PROGRESS), then the member
// loses its partition (ILLEGAL_GENERATION on a heartbeat) and the cluster
// refuses every join after; RevokeTimeout is a minute (the client's
// RebalanceTimeout two), and the pipeline must stop well before.
func TestFinalCommitWaitingForTheNextGenerationIsGivenUpWhenThePartitionIsLost(t *testing.T) {
	const topic, group, records = "events", "g-lost-refused", 10
	c := groupCluster(t, topic, records)
	var lost atomic.Bool
	lose := answerNextHeartbeat(c, group, kerr.IllegalGeneration.Code, func() { lost.Store(true) })
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.JoinGroupRequest)
		if r.Group != group || !lost.Load() {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})

	stopped := stopWithFinalCommitRefused(t, c, group, topic, records)
	lose()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(wait.Deadline):
		t.Fatalf("the pipeline did not stop within %s of the member losing the partition whose final commit waited (RevokeTimeout a minute)", wait.Deadline)
	}
}
