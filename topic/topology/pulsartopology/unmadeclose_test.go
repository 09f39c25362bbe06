package pulsartopology_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: closing a nil Backend, or a zero one New did not make,
// returns nil instead of panicking, and a nil one refuses a Declare with
// topology.ErrClosed.
func TestANilOrUnmadeBackendClosesWithNilAndANilOneRefusesDeclare(t *testing.T) {
	topologytest.UnmadeBackend[string](t, &pulsartopology.Backend[string]{})
}
