package kafkatopic_test

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: zero options take the defaults the field comments and
// docs/topic-backends.md give (1 partition, replication factor 1, acks
// all, 30s admin, 10s connect and 5s revoke timeouts, log ends listed
// every 5s, a publish buffer of
// 256, a 1s nack redelivery delay, new groups starting at the log end),
// and the defaults pass validation.
func TestOptionsDefaultsAreTheDocumentedOnes(t *testing.T) {
	got := kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}}.WithDefaults()
	want := kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{},
		Partitions: 1, ReplicationFactor: 1, Acks: "all", AdminTimeout: 30 * time.Second, ConnectTimeout: 10 * time.Second,
		RevokeTimeout: 5 * time.Second, HighWaterInterval: 5 * time.Second, PublishBuffer: 256, NackRedeliveryDelay: time.Second, InitialOffset: "latest",
		Logger: slog.Default()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithDefaults() =\n%#v, want\n%#v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}

// Guarantee: WithDefaults keeps every field that is set.
func TestWithDefaultsKeepsTheFieldsSet(t *testing.T) {
	own := slog.New(slog.DiscardHandler)
	s := kafkatopic.Options[int]{Partitions: 6, PublishBuffer: 9, NackRedeliveryDelay: time.Minute, InitialOffset: "earliest", Logger: own}.WithDefaults()
	if s.Partitions != 6 || s.PublishBuffer != 9 || s.NackRedeliveryDelay != time.Minute || s.InitialOffset != "earliest" || s.Logger != own {
		t.Fatalf("WithDefaults() = %+v, replaced a field that was set", s)
	}
}
