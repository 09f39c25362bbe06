package kafkatopology_test

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// Guarantee: zero options take the defaults the field comments and
// docs/topology.md give (DLQRetention stays 0: the DLQ is kept until it
// is deleted), and the defaults pass validation.
func TestOptionsDefaultsAreTheDocumentedOnes(t *testing.T) {
	got := kafkatopology.Options[string]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.StringCodec{}}.WithDefaults()
	want := kafkatopology.Options[string]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.StringCodec{},
		Partitions: 1, ReplicationFactor: 1, AdminTimeout: 30 * time.Second, ConnectTimeout: 10 * time.Second,
		ReadAhead: 1024, RevokeTimeout: 5 * time.Second, HighWaterInterval: 5 * time.Second, HoldRetentionMargin: 7 * 24 * time.Hour,
		InitialOffset: "latest", Logger: slog.Default()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithDefaults() =\n%#v, want\n%#v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}
