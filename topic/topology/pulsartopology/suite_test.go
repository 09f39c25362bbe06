package pulsartopology_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// The shared suite, in real time, on an in-process broker per subtest;
// a restart crashes the backend and connects a new one to the same broker.
func TestTopologySuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite runs in real time (about a minute)")
	}
	brokers := map[*testing.T]*pulsartopology.Options[topologytest.Msg]{}
	topologytest.Run(t, topologytest.Config{
		NewBackend: func(t *testing.T) topology.Backend[topologytest.Msg] {
			o := options(testbroker.Pulsar(t), topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{}))
			brokers[t] = &o
			return newBackend(t, o)
		},
		Restart: func(t *testing.T, old topology.Backend[topologytest.Msg]) topology.Backend[topologytest.Msg] {
			old.(*pulsartopology.Backend[topologytest.Msg]).Crash()
			return newBackend(t, *brokers[t])
		},
	})
}
