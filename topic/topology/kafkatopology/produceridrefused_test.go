package kafkatopology

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: a New whose idempotent producer, the backend's own or its
// single-record one, the cluster refuses a producer id (an ACL without
// WRITE on a topic, or IdempotentWrite on the cluster before Kafka 2.8)
// fails wrapping ErrConnect and sarama.ErrClusterAuthorizationFailed, with
// an error that says the producer id was refused, which permissions to
// grant and which option turns idempotence off, without the password.
func TestNewWhoseProducerIDIsRefusedSaysWhatToGrant(t *testing.T) {
	for _, pass := range []int32{0, 1} { // the backend's own producer starts first, then the single-record one
		k := testbroker.KafkaWithACLs(t)
		testbroker.RefuseProducerIDs(k.Cluster, pass)
		_, err := New(Options[topologytest.Msg]{Brokers: k.ListenAddrs(), Config: k.Config(), Codec: topic.JSONCodec[topologytest.Msg]{}})
		testbroker.ExpectProducerIDRefused(t, pass, err, ErrConnect, k.Password, "Config.Producer.Retry.Max 0")
	}
}
