package pulsartopology_test

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// BenchmarkPublishToAck measures a publish → pipeline (two processors) →
// ack round per message through the Pulsar backend on an in-process
// broker: plain (a hold and a DLQ declared, unused), and sequenced over 64
// keys. Four publishers run at once, each waiting for its receipts.
func BenchmarkPublishToAck(b *testing.B) {
	for _, c := range []struct {
		name string
		b    *topology.Builder
	}{
		{"plain", topology.New("bench").Hold(time.Second).DLQ()},
		{"sequenced", topology.New("bench").Sequenced(topology.Skip).Hold(time.Second).DLQ()},
	} {
		b.Run(c.name, func(b *testing.B) {
			be := newBackend(b, options(startBroker(b), topic.Codec[topologytest.Msg](topic.JSONCodec[topologytest.Msg]{})))
			q, err := be.Declare(context.Background(), build(b, c.b))
			if err != nil {
				b.Fatal(err)
			}
			topologytest.PublishToAck(b, q, 4, time.Minute)
		})
	}
}
