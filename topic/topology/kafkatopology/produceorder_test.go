package kafkatopology

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: letters published one after another to a partition are
// stored once each, in publish order, when the broker answers produce
// requests with a retriable error after it has written their records
// (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND): the producer is
// idempotent, so the broker does not store the retried batches again.
func TestLettersAreStoredOnceInOrderWhenWrittenProducesAreRetried(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend} {
		t.Run(code.Message, func(t *testing.T) {
			c := testbroker.Kafka(t)
			cfg := testbroker.SaramaConfig()
			cfg.Producer.Retry.Backoff = 10 * time.Millisecond
			b, err := New(Options[msg]{
				Brokers: c.ListenAddrs(), Config: cfg, Codec: topic.JSONCodec[msg]{}, Partitions: 1,
				AdminTimeout: patience, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
			q := declare(t, b, topology.New("produce-order"))
			kname := kafkaName("produce-order")
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kname, Err: code, Count: 3})
			const n = 20
			for v := range n {
				if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{Key: "one", N: v}}); err != nil {
					t.Fatalf("Publish(%d): %v", v, err)
				}
			}
			recs, _ := logLetters(t, c, kname)
			got := make([]int, len(recs))
			for i, r := range recs {
				var m msg
				if err := json.Unmarshal(r.Value, &m); err != nil {
					t.Fatal(err)
				}
				got[i] = m.N
			}
			testbroker.OnceInOrder(t, "letters", got, n)
		})
	}
}
