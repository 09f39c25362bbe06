package kafkatopic_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: a New whose single-record producer cannot start (the
// cluster refuses its producer id, with an idempotent producer) fails
// wrapping ErrConnect and leaves no client of the backend running: the
// single-record producer's client is closed with the others.
func TestNewWhoseSingleRecordProducerFailsToStartLeavesNoClientRunning(t *testing.T) {
	c := testbroker.Kafka(t)
	inits := testbroker.RefuseProducerIDs(c, 0) // the single-record producer starts first
	o := testOptions(c, topic.Codec[string](topic.StringCodec{}))
	o.Config.Producer.Idempotent = true
	o.Config.Net.MaxOpenRequests = 1
	if _, err := kafkatopic.New(o); !errors.Is(err, kafkatopic.ErrConnect) {
		t.Fatalf("New = %v, want an error wrapping ErrConnect", err)
	}
	if n := inits.Load(); n != 1 {
		t.Fatalf("the cluster was asked %d producer ids, want 1", n)
	}
	goleak.VerifyNone(t,
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*broker).listen"),
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
