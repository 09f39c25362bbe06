package kafkatopology

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: a sarama Config field that sizes what sarama allocates
// (ChannelBufferSize: a channel per topic and per partition;
// Net.MaxOpenRequests: two per broker connection; Producer.Retry.Max: a
// table per partition) is bounded: at its bound New accepts it, past it
// New refuses it with an error naming the field and the rule, before any
// client exists, instead of sarama panicking ("makechan: size out of
// range") on one of its own goroutines when the backend connects or
// publishes.
func TestNewRefusesASaramaConfigThatSizesPastItsBound(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	opts := func(set func(*sarama.Config)) Options[topologytest.Msg] {
		cfg := testbroker.SaramaConfig()
		set(cfg)
		return Options[topologytest.Msg]{Brokers: brokers, Config: cfg, Codec: topic.JSONCodec[topologytest.Msg]{},
			AdminTimeout: 30 * time.Second, RevokeTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	}
	cases := []struct {
		field string
		limit int
		set   func(*sarama.Config, int)
	}{
		{"kafkatopology.config.ChannelBufferSize", MaxChannelBufferSize, func(c *sarama.Config, n int) { c.ChannelBufferSize = n }},
		{"kafkatopology.config.Net.MaxOpenRequests", MaxOpenRequests, func(c *sarama.Config, n int) { c.Net.MaxOpenRequests = n }},
		{"kafkatopology.config.Producer.Retry.Max", MaxProducerRetries, func(c *sarama.Config, n int) { c.Producer.Retry.Max = n }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			if err := opts(func(c *sarama.Config) { tc.set(c, tc.limit) }).WithDefaults().Validate(); err != nil {
				t.Fatalf("%s at its bound %d refused: %v", tc.field, tc.limit, err)
			}
			for _, n := range []int{tc.limit + 1, 1 << 62} {
				b, err := New(opts(func(c *sarama.Config) { tc.set(c, n) }))
				if err == nil {
					// What a user does next: declare and publish.
					q := declare(t, b, topology.New("bounded"))
					perr := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}})
					topologytest.MustClose(t, "the backend", b.Close)
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
	cases := []struct {
		field string
		set   func(*Options[msg], int)
		limit int
	}{
		{"kafkatopology.partitions", func(o *Options[msg], n int) { o.Partitions = int32(n) }, MaxPartitions},
		{"kafkatopology.replicationFactor", func(o *Options[msg], n int) { o.ReplicationFactor = int16(n) }, MaxReplicationFactor},
		{"kafkatopology.readAhead", func(o *Options[msg], n int) { o.ReadAhead = n }, MaxReadAhead},
	}
	for _, tc := range cases {
		o := Options[msg]{Brokers: []string{"127.0.0.1:9092"}, Codec: topic.JSONCodec[msg]{}}.WithDefaults()
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
