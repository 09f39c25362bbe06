package kafkatopic_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: a New whose idempotent producer the cluster refuses a
// producer id (an ACL without WRITE on a topic, or IdempotentWrite on the
// cluster before Kafka 2.8) fails wrapping ErrConnect and
// sarama.ErrClusterAuthorizationFailed, with an error that says the
// producer id was refused, which permissions to grant and which options
// turn idempotence off, without the password.
func TestNewWhoseProducerIDIsRefusedSaysWhatToGrant(t *testing.T) {
	for _, pass := range []int32{0, 1} { // the single-record producer starts first, then the batching one
		k := testbroker.KafkaWithACLs(t)
		testbroker.RefuseProducerIDs(k.Cluster, pass)
		o := testOptions(k.Cluster, topic.Codec[string](topic.StringCodec{}))
		o.Config = k.Config()
		_, err := kafkatopic.New(o)
		testbroker.ExpectProducerIDRefused(t, pass, err, kafkatopic.ErrConnect, k.Password, `Acks "leader"`, "Config.Producer.Retry.Max 0")
	}
}
