package kafkaorder

import (
	"testing"

	"github.com/IBM/sarama"
)

// Guarantee: a producing client has one request at a time on each
// connection whatever the configuration says, is idempotent where the
// configuration allows it, and the configuration given is left as it was.
func TestProducerKeepsOrderAndIsIdempotentWhereAcksAllow(t *testing.T) {
	for _, tc := range []struct {
		name       string
		edit       func(*sarama.Config)
		idempotent bool
	}{
		{"acks all", func(*sarama.Config) {}, true},
		{"acks leader", func(c *sarama.Config) { c.Producer.RequiredAcks = sarama.WaitForLocal }, false},
		{"acks none", func(c *sarama.Config) { c.Producer.RequiredAcks = sarama.NoResponse }, false},
		{"no retries", func(c *sarama.Config) { c.Producer.Retry.Max = 0 }, false},
		{"version 0.10", func(c *sarama.Config) { c.Version = sarama.V0_10_2_0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sarama.NewConfig()
			in.Producer.RequiredAcks = sarama.WaitForAll
			in.Net.MaxOpenRequests = 5
			tc.edit(in)
			before := *in
			c := Producer(in)
			if c.Net.MaxOpenRequests != 1 {
				t.Errorf("Net.MaxOpenRequests %d, want 1", c.Net.MaxOpenRequests)
			}
			if c.Producer.Idempotent != tc.idempotent {
				t.Errorf("Producer.Idempotent %v, want %v", c.Producer.Idempotent, tc.idempotent)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("sarama refuses the configuration: %v", err)
			}
			if in.Net.MaxOpenRequests != before.Net.MaxOpenRequests || in.Producer.Idempotent != before.Producer.Idempotent {
				t.Error("the configuration given was modified")
			}
		})
	}
}
