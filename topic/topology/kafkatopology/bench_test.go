package kafkatopology

import (
	"context"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// BenchmarkPublishToAck measures a publish → broker ack → pipeline (two
// processors) → settle round per message through a Kafka topology (a
// hold, a DLQ) on kfake, with 8 publishers producing at once (each
// publish waits for the broker's acknowledgement, so one publisher would
// measure the round trip alone).
func BenchmarkPublishToAck(b *testing.B) {
	be := newBackend(b, testbroker.Kafka(b).ListenAddrs())
	top, err := topology.New("bench").Hold(time.Second).DLQ().Build()
	if err != nil {
		b.Fatal(err)
	}
	q, err := be.Declare(context.Background(), top)
	if err != nil {
		b.Fatal(err)
	}
	topologytest.PublishToAck(b, q, 8, time.Minute)
}
