package kafkatopology

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: on a sequenced topology, a failed run's reader, a member of
// the group holding the main topic's partition, holds up none of its
// keys: the letters the source held back from it go back to the group,
// it leaves the group once its letters in the pipeline are settled, and
// the next run's reader reads on from what it committed, in order (see
// topologytest.FailedSequencedRun).
func TestAFailedSequencedRunsKeysGoOnWithTheNextReader(t *testing.T) {
	c := testbroker.Kafka(t)
	b := newBackend(t, c.ListenAddrs())
	q := declare(t, b, topology.New("failed-run").Sequenced(topology.Skip).DLQ().RoutingShards(1))
	topologytest.FailedSequencedRun(t, q, time.Minute)
}
