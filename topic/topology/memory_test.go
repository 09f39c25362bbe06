package topology_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The in-memory backend passes the whole topology suite, in fake time.
func TestMemorySuite(t *testing.T) {
	topologytest.Run(t, topologytest.Config{
		Synctest: true,
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			return m
		},
	})
}
