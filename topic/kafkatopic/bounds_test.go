package kafkatopic_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: a sarama Config field that sizes what sarama allocates
// (ChannelBufferSize: a channel per topic and per partition;
// Net.MaxOpenRequests: two per broker connection; Producer.Retry.Max: a
// table per partition) is bounded: at its bound New accepts it, past it
// New refuses it with an error naming the field and the rule, before any
// client exists, instead of sarama panicking ("makechan: size out of
// range") on one of its own goroutines at the first publish or connection.
func TestNewRefusesASaramaConfigThatSizesPastItsBound(t *testing.T) {
	c := testbroker.Kafka(t)
	cases := []struct {
		field string
		limit int
		set   func(*sarama.Config, int)
	}{
		{"config.ChannelBufferSize", kafkatopic.MaxChannelBufferSize, func(c *sarama.Config, n int) { c.ChannelBufferSize = n }},
		{"config.Net.MaxOpenRequests", kafkatopic.MaxOpenRequests, func(c *sarama.Config, n int) { c.Net.MaxOpenRequests = n }},
		{"config.Producer.Retry.Max", kafkatopic.MaxProducerRetries, func(c *sarama.Config, n int) { c.Producer.Retry.Max = n }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			at := testOptions[int](c, topic.IntCodec{})
			tc.set(at.Config, tc.limit)
			if err := at.Validate(); err != nil {
				t.Fatalf("%s at its bound %d refused: %v", tc.field, tc.limit, err)
			}
			for _, n := range []int{tc.limit + 1, 1 << 62} {
				o := testOptions[int](c, topic.IntCodec{})
				tc.set(o.Config, n)
				b, err := kafkatopic.New(o)
				if err == nil {
					// What a user does next: publish.
					h := newTopic(t, b, "bounded", topic.Options{})
					perr := h.Publish(ctxT(t), 1)
					_ = b.Close(ctxT(t))
					t.Fatalf("%s %d accepted by New (publish: %v)", tc.field, n, perr)
				}
				var es validate.Errors
				if !errors.As(err, &es) || len(es) != 1 || !es.Has(tc.field, "lte") {
					t.Fatalf("%s %d: New = %v, want one lte error on %s", tc.field, n, err, tc.field)
				}
				if want := fmt.Sprintf("%s must be ≤ %d", tc.field, tc.limit); !strings.Contains(err.Error(), want) {
					t.Fatalf("%s %d: error %q does not say %q", tc.field, n, err, want)
				}
			}
		})
	}
}

// Guarantee: the exported bounds are the ones Validate enforces: each
// size option is accepted at its Max constant and refused one past it,
// with an error naming the field and the rule.
func TestSizeOptionsAreBoundedByTheirConstants(t *testing.T) {
	base := func() kafkatopic.Options[int] {
		return kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}}
	}
	cases := []struct {
		field string
		set   func(*kafkatopic.Options[int], int)
		limit int
	}{
		{"partitions", func(o *kafkatopic.Options[int], n int) { o.Partitions = int32(n) }, kafkatopic.MaxPartitions},
		{"replication_factor", func(o *kafkatopic.Options[int], n int) { o.ReplicationFactor = int16(n) }, kafkatopic.MaxReplicationFactor},
		{"publish_buffer", func(o *kafkatopic.Options[int], n int) { o.PublishBuffer = n }, kafkatopic.MaxPublishBuffer},
	}
	for _, tc := range cases {
		o := base()
		tc.set(&o, tc.limit)
		if err := o.Validate(); err != nil {
			t.Errorf("%s at %d refused: %v", tc.field, tc.limit, err)
		}
		tc.set(&o, tc.limit+1)
		var es validate.Errors
		if err := o.Validate(); !errors.As(err, &es) || !es.Has(tc.field, "lte") {
			t.Errorf("%s at %d: Validate = %v, want an lte error on %s", tc.field, tc.limit+1, err, tc.field)
		}
	}
}

// Guarantee: each timeout is accepted at its Max constant and refused one
// past it, with an error naming the field and the rule.
func TestTimeoutsAreBoundedByTheirConstants(t *testing.T) {
	base := func() kafkatopic.Options[int] {
		return kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}}
	}
	for _, tc := range []struct {
		field string
		set   func(*kafkatopic.Options[int], time.Duration)
		limit time.Duration
	}{
		{"admin_timeout", func(o *kafkatopic.Options[int], d time.Duration) { o.AdminTimeout = d }, kafkatopic.MaxAdminTimeout},
		{"connect_timeout", func(o *kafkatopic.Options[int], d time.Duration) { o.ConnectTimeout = d }, kafkatopic.MaxConnectTimeout},
		{"revoke_timeout", func(o *kafkatopic.Options[int], d time.Duration) { o.RevokeTimeout = d }, kafkatopic.MaxAdminTimeout},
		{"nack_redelivery_delay", func(o *kafkatopic.Options[int], d time.Duration) { o.NackRedeliveryDelay = d }, kafkatopic.MaxNackRedeliveryDelay},
		{"high_water_interval", func(o *kafkatopic.Options[int], d time.Duration) { o.HighWaterInterval = d }, kafkatopic.MaxHighWaterInterval},
	} {
		o := base()
		tc.set(&o, tc.limit)
		if err := o.Validate(); err != nil {
			t.Errorf("%s at %s refused: %v", tc.field, tc.limit, err)
		}
		tc.set(&o, tc.limit+time.Millisecond)
		var es validate.Errors
		if err := o.Validate(); !errors.As(err, &es) || !es.Has(tc.field, "lte") {
			t.Errorf("%s at %s: Validate = %v, want an lte error on %s", tc.field, tc.limit+time.Millisecond, err, tc.field)
		}
	}
}

// Guarantee: Options.HighWaterInterval is refused below
// MinHighWaterInterval, with an error naming the field and the rule, and
// accepted at it.
func TestHighWaterIntervalBelowItsMinimumIsRefused(t *testing.T) {
	o := kafkatopic.Options[int]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.IntCodec{}, HighWaterInterval: kafkatopic.MinHighWaterInterval}
	if err := o.Validate(); err != nil {
		t.Errorf("high_water_interval at %s refused: %v", o.HighWaterInterval, err)
	}
	o.HighWaterInterval = kafkatopic.MinHighWaterInterval - time.Millisecond
	var es validate.Errors
	if err := o.Validate(); !errors.As(err, &es) || !es.Has("high_water_interval", "gte") {
		t.Errorf("high_water_interval at %s: Validate = %v, want a gte error on high_water_interval", o.HighWaterInterval, err)
	}
}
