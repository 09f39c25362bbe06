package franz

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: a member that loses its partitions (its session ended:
// ILLEGAL_GENERATION on a heartbeat) while Close is releasing them
// commits nothing of them in the generation it joins next, where they
// may be another member's: the claims Close took are marked lost as the
// ones it still holds are. Here the final commit of Close's release is
// held before it is sent until the member has lost its partition and
// joined a new generation; no commit of that generation may carry an
// offset.
func TestLostClaimUnderReleaseCommitsNothingInTheNextGeneration(t *testing.T) {
	const topic, group, records = "events", "g-lost-underway", 10
	c := groupCluster(t, topic, records)
	// The member's first commit (CommitInterval is an hour: the final one,
	// of Close's release) waits before it is sent.
	stalled, resume := holdFirstCommit(t)
	lose := answerNextHeartbeat(c, group, kerr.IllegalGeneration.Code, nil)
	var mu sync.Mutex
	var violations []string
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group || r.Generation <= 1 {
			return nil, nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				violations = append(violations, fmt.Sprintf("generation %d committed offset %d", r.Generation, rp.Offset))
			}
		}
		return nil, nil, false
	})

	m, stopped := stopWithCommitHeld(t, c, group, topic, RebalanceRange, records, nil, stalled)
	lose()
	wait.For(t, "the member to join a new generation", func() bool {
		_, gen := m.client().GroupMetadata()
		return gen > 1
	})
	resume()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("the lost claim's offsets went out in the next generation: %v", violations)
	}
}
