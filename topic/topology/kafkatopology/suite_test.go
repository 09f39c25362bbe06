package kafkatopology

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

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
	clusters := map[*testing.T]*kfake.Cluster{}
	topologytest.Run(t, topologytest.Config{
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			c := testbroker.Kafka(t)
			clusters[t] = c
			return newBackend(t, c.ListenAddrs())
		},
		Hang: func(t *testing.T, _ topology.Backend[topologytest.Msg]) { testbroker.HangKafka(t, clusters[t]) },
		Restart: func(t *testing.T, old topology.Backend[topologytest.Msg]) topology.Backend[topologytest.Msg] {
			b := old.(*Backend[topologytest.Msg])
			topologytest.MustClose(t, "the backend, crashing", b.crash)
			return newBackend(t, b.opts.Brokers)
		},
	})
}
