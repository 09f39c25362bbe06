package franz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Guarantee: the final commit of a claim Close releases is tried again
// when the cluster refuses it with an error that may pass (here
// REQUEST_TIMED_OUT, which franz-go does not send again itself): the
// first two attempts are refused, and what the member handled is still
// committed once the pipeline has stopped.
func TestFinalCommitRefusedTwiceStillLands(t *testing.T) {
	const topic, group, records, refusals = "events", "g-final-retry", 10, 2
	c := groupCluster(t, topic, records)
	refused := refuseFirstCommits(c, group, kerr.RequestTimedOut.Code, refusals)
	// CommitInterval is an hour: the first commit is the final one, of
	// Close's release.
	stalled, resume := holdFirstCommit(t)
	_, stopped := stopWithCommitHeld(t, c, group, topic, RebalanceRange, records, nil, stalled)
	resume()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := committedOffset(c, group, topic); got != records {
		t.Fatalf("the group's committed offset is %d after the cluster refused the final commit %d times, want %d",
			got, refused.Failed(), records)
	}
}
