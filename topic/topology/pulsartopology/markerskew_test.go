package pulsartopology_test

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a dead-letter reader whose marker, sent a minute ago or
// more, does not come back (another reader of the subscription, its clock
// a minute or more apart from the one that stamped it, dropped it) sends
// a new one, and catches up: it does not wait for the lost one for ever.
func TestADeadReaderWhoseMarkerIsLostCatchesUpWithANewOne(t *testing.T) {
	r := deadReaderOf(t, testbroker.Pulsar(t), "skewed", 2*time.Second)
	defer topologytest.MustClose(t, "a reader", r.Close)
	pulsartopology.LoseMarker(r)
	if n, err := r.TryReceive(ctxT(t), make([]topology.Letter[string], 1)); n != 0 || err != nil {
		t.Fatalf("TryReceive of an empty DLQ, its reader's marker lost = %d, %v; want 0, nil", n, err)
	}
}
