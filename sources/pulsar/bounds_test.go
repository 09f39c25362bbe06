package pulsar_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// Guarantee: Consumer.MaxPendingChunkedMessage, which pulsar-client-go
// sizes a map by in every partition consumer it makes, is bounded: 0 (the
// client's default), 1 and MaxPendingChunkedMessageLimit are accepted; one
// more, a huge value or a negative one is an error naming
// pulsar.consumer.maxPendingChunkedMessage and its rule, reported by
// Validate before any consumer is made.
func TestValidateBoundsMaxPendingChunkedMessage(t *testing.T) {
	client := newIdleClient(t)
	opts := func(n int) bpulsar.Options {
		o := bpulsar.Options{Client: client, Topics: []string{"a"}, Subscription: "s"}
		o.Consumer.MaxPendingChunkedMessage = n
		return o
	}
	for _, n := range []int{0, 1, 100, bpulsar.MaxPendingChunkedMessageLimit} {
		if err := bpulsar.New(opts(n)).Validate(); err != nil {
			t.Errorf("maxPendingChunkedMessage %d rejected: %v", n, err)
		}
	}
	want := fmt.Sprintf("pulsar.consumer.maxPendingChunkedMessage must be 0 (the client's default, 100) or 1 to %d",
		bpulsar.MaxPendingChunkedMessageLimit)
	for _, n := range []int{bpulsar.MaxPendingChunkedMessageLimit + 1, 1 << 40, math.MaxInt, -1, math.MinInt} {
		err := bpulsar.New(opts(n)).Validate()
		if err == nil {
			t.Errorf("maxPendingChunkedMessage %d accepted", n)
			continue
		}
		es := fieldErrors(t, err)
		if len(es) != 1 || !es.Has("pulsar.consumer.maxPendingChunkedMessage", "range") {
			t.Errorf("maxPendingChunkedMessage %d: want one range error on pulsar.consumer.maxPendingChunkedMessage, got %v", n, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("maxPendingChunkedMessage %d: error %q does not say %q", n, err, want)
		}
	}
}
