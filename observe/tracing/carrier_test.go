package tracing_test

import (
	"slices"
	"testing"

	"github.com/boulevard-go/boulevard/observe/tracing"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: the carrier of a Kafka record lists its header keys, for
// propagators that read every key (baggage, vendor formats), and reads
// each header's value by its key.
func TestAKafkaRecordsCarrierListsItsHeaderKeys(t *testing.T) {
	c := tracing.DefaultCarrier(&kafka.Metadata{Headers: []kafka.Header{
		{Key: []byte("traceparent"), Value: []byte("00-aa-bb-01")},
		{Key: []byte("baggage"), Value: []byte("tenant=eu")},
	}})
	if keys := c.Keys(); !slices.Equal(keys, []string{"traceparent", "baggage"}) {
		t.Fatalf("carrier keys %q, want [traceparent baggage]", keys)
	}
	if v := c.Get("baggage"); v != "tenant=eu" {
		t.Fatalf("carrier value of baggage %q, want tenant=eu", v)
	}
}
