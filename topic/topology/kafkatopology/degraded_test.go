package kafkatopology

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a pipeline reading a Kafka topology through a topology
// source, with a group reader or a broadcast reader, has its stage
// degraded while the cluster cannot be reached, with the client's error
// as LastError, and running again once the cluster answers, within the
// same run (no restart); every letter published before and after the
// outage is handled (see topologytest.DegradedWhileAway).
func TestTopologySourceIsDegradedWhileTheClusterIsOutOfReach(t *testing.T) {
	for name, tb := range map[string]*topology.Builder{
		"group":     topology.New("outage").DLQ(),
		"broadcast": topology.New("outage").Broadcast(),
	} {
		t.Run(name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.Partitions = 2 })
			q := declare(t, b, tb)
			topologytest.DegradedWhileAway(t, q, time.Minute, topologytest.Outage{
				Away: func(t *testing.T, degraded func() bool, state func() string) {
					testbroker.OutOfReach(t, c, "the stage degraded", degraded, state)
				},
			})
		})
	}
}
