package pulsartopic_test

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: zero options take the defaults the field comments and
// docs/topic-backends.md give (BatchingMaxPublishDelay and
// MaxReconnectToBroker stay 0: the client's 10ms, and reconnecting for
// ever), and the defaults pass validation.
func TestOptionsDefaultsAreTheDocumentedOnes(t *testing.T) {
	got := pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{}}.WithDefaults()
	want := pulsartopic.Options[int]{ServiceURL: "pulsar://x:6650", Codec: topic.IntCodec{},
		Tenant: "public", Namespace: "default", AdminTimeout: 30 * time.Second, SubscribeTimeout: 90 * time.Second,
		MaxPendingMessages: 1000, SendTimeout: 30 * time.Second, NackRedeliveryDelay: time.Second, Logger: slog.Default()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithDefaults() =\n%#v, want\n%#v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}
