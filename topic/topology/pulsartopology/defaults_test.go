package pulsartopology_test

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// Guarantee: zero options take the defaults the field comments and
// docs/topology.md give (MaxReconnectToBroker stays 0: reconnect for
// ever), and the defaults pass validation.
func TestOptionsDefaultsAreTheDocumentedOnes(t *testing.T) {
	got := pulsartopology.Options[string]{ServiceURL: "pulsar://x:6650", Codec: topic.StringCodec{}}.WithDefaults()
	want := pulsartopology.Options[string]{ServiceURL: "pulsar://x:6650", Codec: topic.StringCodec{},
		Tenant: "public", Namespace: "default", OperationTimeout: 30 * time.Second, ReadAhead: 1000,
		RedeliveryDelay: time.Second, MaxMessageSize: 5 << 20, Logger: slog.Default()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithDefaults() =\n%#v, want\n%#v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}
