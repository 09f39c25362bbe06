package topology_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// BenchmarkSource measures a publish → pipeline → ack round per message
// through the in-memory backend: plain, and sequenced over 64 keys. It is
// the Kafka and Pulsar backends' publish-to-ack benchmark
// (topologytest.PublishToAck) with one publisher.
func BenchmarkSource(b *testing.B) {
	for _, c := range []struct {
		name string
		b    *topology.Builder
	}{
		{"plain", topology.New("bench").Hold(time.Second).DLQ()},
		{"sequenced", topology.New("bench").Sequenced(topology.Skip).Hold(time.Second).DLQ()},
	} {
		b.Run(c.name, func(b *testing.B) {
			top, err := c.b.Build()
			if err != nil {
				b.Fatal(err)
			}
			m, err := topology.NewMemory[topologytest.Msg](topology.MemoryOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			q, err := m.Declare(context.Background(), top)
			if err != nil {
				b.Fatal(err)
			}
			topologytest.PublishToAck(b, q, 1, time.Minute)
		})
	}
}
