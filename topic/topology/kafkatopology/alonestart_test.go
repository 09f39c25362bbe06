package kafkatopology

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a New whose single-record producer cannot start (the
// cluster refuses its producer id, with an idempotent producer) fails
// wrapping ErrConnect and leaves no client of the backend running: the
// single-record producer's client is closed with the others.
func TestNewWhoseSingleRecordProducerFailsToStartLeavesNoClientRunning(t *testing.T) {
	c := testbroker.Kafka(t)
	inits := testbroker.RefuseProducerIDs(c, 1) // the backend's own producer starts
	cfg := testbroker.SaramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	o := Options[topologytest.Msg]{Brokers: c.ListenAddrs(), Config: cfg, Codec: topic.JSONCodec[topologytest.Msg]{}}
	if _, err := New(o); !errors.Is(err, ErrConnect) {
		t.Fatalf("New = %v, want an error wrapping ErrConnect", err)
	}
	if n := inits.Load(); n != 2 {
		t.Fatalf("the cluster was asked %d producer ids, want 2", n)
	}
	goleak.VerifyNone(t, hungCluster()...)
}
