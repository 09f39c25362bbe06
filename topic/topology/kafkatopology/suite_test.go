package kafkatopology

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The topology suite in real time against kfake, a crash included: every
// guarantee of package topology holds on Kafka.
func TestSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite runs in real time (holds of 1s and 2s)")
	}
	topologytest.Run(t, topologytest.Config{
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			return newBackend(t, testbroker.Kafka(t).ListenAddrs())
		},
		Restart: func(t *testing.T, old topology.Backend[topologytest.Msg]) topology.Backend[topologytest.Msg] {
			b := old.(*Backend[topologytest.Msg])
			b.crash()
			return newBackend(t, b.opts.Brokers)
		},
	})
}
