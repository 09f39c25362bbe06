package kafkatopic_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: a publisher's records of one key are stored once each, in
// publish order, when the broker answers produce requests with a
// retriable error after it has written their records (REQUEST_TIMED_OUT,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND): the producer is idempotent, so the
// broker does not store the retried batches again.
func TestOneKeysRecordsAreStoredOnceInOrderWhenWrittenProducesAreRetried(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend} {
		t.Run(code.Message, func(t *testing.T) {
			c := testbroker.Kafka(t)
			o := testOptions[int](c, topic.IntCodec{})
			o.Key = func(int) []byte { return []byte("one") }
			o.Config.Producer.Retry.Backoff = 10 * time.Millisecond
			h := newTopic(t, newBackend(t, o), "produce-order", topic.Options{})
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkatopic.KafkaTopic("produce-order"), Err: code, Count: 3})
			const n = 20
			for v := range n {
				if err := h.Publish(ctxT(t), v); err != nil {
					t.Fatalf("Publish(%d): %v", v, err)
				}
			}
			recs, _ := logValues(t, c, kafkatopic.KafkaTopic("produce-order"))
			got := make([]int, len(recs))
			for i, r := range recs {
				got[i] = int(binary.BigEndian.Uint64(r.Value))
			}
			testbroker.OnceInOrder(t, "records", got, n)
		})
	}
}
