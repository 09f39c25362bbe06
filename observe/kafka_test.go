package observe_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: the failed messages a Kafka source committed past under its
// failure policy are exported per partition, as a counter, so that an
// alert can name the topic and partition whose messages were given up.
func TestKafkaFailedCommittedExportedPerPartition(t *testing.T) {
	src := newFixedKafka(kafka.Stats{GroupID: "readers", Members: []kafka.MemberStats{{
		Stage: "events.producer.0", GenerationID: 2,
		Partitions: []kafka.PartitionStats{
			{Topic: "events", Partition: 0, GenerationID: 2, FailedCommitted: 12},
			{Topic: "events", Partition: 1, GenerationID: 2},
		},
	}}})
	obs := observe.New(observe.Options{})
	if err := obs.AddKafka(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	code, body := serveMetrics(t, obs.Handler(nil))
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d, want 200:\n%s", code, body)
	}
	expectSeriesOnce(t, body, `boulevard_kafka_failed_committed_total{group="readers",partition="0",topic="events"}`, 12)
	expectSeriesOnce(t, body, `boulevard_kafka_failed_committed_total{group="readers",partition="1",topic="events"}`, 0)
	if !strings.Contains(body, "# TYPE boulevard_kafka_failed_committed_total counter") {
		t.Error("boulevard_kafka_failed_committed_total is not typed as a counter")
	}
	promtoolCheck(t, body)
}
