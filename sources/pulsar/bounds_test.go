package pulsar_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

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

// Guarantee: each bound of the source's own options is itself accepted,
// and the value just past it is refused by Validate with one error naming
// the field and the rule: NameSuffix of 64 characters (65 refused),
// SubscribeTimeout of 1 hour (a nanosecond more refused, as is a negative
// one) and SubscriptionType KeyShared, the last type (the next refused).
func TestValidateBoundsAreInclusive(t *testing.T) {
	client := newIdleClient(t)
	opts := func(set func(*bpulsar.Options)) bpulsar.Options {
		o := bpulsar.Options{Client: client, Topics: []string{"a"}, Subscription: "s"}
		set(&o)
		return o
	}
	suffix := func(n int) func(*bpulsar.Options) {
		return func(o *bpulsar.Options) { o.NameSuffix = strings.Repeat("h", n) }
	}
	subscribe := func(d time.Duration) func(*bpulsar.Options) {
		return func(o *bpulsar.Options) { o.SubscribeTimeout = d }
	}
	kind := func(k bpulsar.SubscriptionType) func(*bpulsar.Options) {
		return func(o *bpulsar.Options) { o.SubscriptionType = k }
	}
	for _, c := range []struct {
		field, rule string
		at, past    func(*bpulsar.Options)
	}{
		{"pulsar.nameSuffix", "max", suffix(64), suffix(65)},
		{"pulsar.subscribeTimeout", "gte", subscribe(0), subscribe(-1)},
		{"pulsar.subscribeTimeout", "lte", subscribe(time.Hour), subscribe(time.Hour + 1)},
		{"pulsar.subscriptionType", "lte", kind(bpulsar.KeyShared), kind(bpulsar.KeyShared + 1)},
	} {
		if err := bpulsar.New(opts(c.at)).Validate(); err != nil {
			t.Errorf("%s at its %s bound refused: %v", c.field, c.rule, err)
		}
		err := bpulsar.New(opts(c.past)).Validate()
		if err == nil {
			t.Errorf("%s just past its %s bound accepted", c.field, c.rule)
			continue
		}
		if es := fieldErrors(t, err); len(es) != 1 || !es.Has(c.field, c.rule) {
			t.Errorf("%s just past its %s bound: Validate = %v, want one %s error on %s", c.field, c.rule, err, c.rule, c.field)
		}
	}
}
