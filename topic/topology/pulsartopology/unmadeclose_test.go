package pulsartopology_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a zero Backend New did not make refuses a Declare at once
// with an error wrapping topic.ErrNotCreated; closing it, or a nil
// Backend, returns nil instead of panicking, and both then refuse a
// Declare with topology.ErrClosed.
func TestAnUnmadeBackendRefusesDeclareAndClosesWithNil(t *testing.T) {
	topologytest.UnmadeBackend[string](t, &pulsartopology.Backend[string]{})
}
