package pulsartopology_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: on a sequenced topology, whose subscription is Key_Shared,
// a failed run's reader holds up none of its keys: the letters the source
// held back from it go back to the group, its consumer closes once its
// letters in the pipeline are settled, and the broker hands its keys, and
// what it had not settled, to the next run's consumer, in order (see
// topologytest.FailedSequencedRun).
func TestAFailedSequencedRunsKeysGoOnWithTheNextReader(t *testing.T) {
	b := testbroker.Pulsar(t)
	be := newBackend(t, options(b, topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{})))
	q, err := be.Declare(ctxT(t), build(t, topology.New("failed-run").Sequenced(topology.Skip).DLQ()))
	if err != nil {
		t.Fatal(err)
	}
	topologytest.FailedSequencedRun(t, q, patience)
}
