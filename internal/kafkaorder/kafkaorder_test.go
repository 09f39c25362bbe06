package kafkaorder

import (
	"errors"
	"fmt"
	"io"
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

// Guarantee: the error of making a producer wraps the caller's sentinel
// and the client's error; a refused producer id says so, what to grant
// and how the backend turns idempotence off, and a refused transactional
// id says to grant WRITE on it; any other error is left as it was.
func TestStartErrorSaysWhatARefusedProducerNeeds(t *testing.T) {
	errConnect := errors.New("cannot connect")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"producer id refused", fmt.Errorf("brokers: %w", sarama.ErrClusterAuthorizationFailed),
			"cannot connect: the cluster refused the idempotent producer a producer id: grant the principal WRITE on a topic (Kafka 2.8 and later) or IdempotentWrite on the cluster, or turn idempotence off (Acks leader): brokers: kafka server: The client is not authorized to send this request type"},
		{"transactional id refused", sarama.ErrTransactionalIDAuthorizationFailed,
			"cannot connect: the cluster refused the producer its transactional id: grant the principal WRITE on the transactional id (Config.Producer.Transaction.ID): kafka server: Transactional ID authorization failed"},
		{"another error", io.ErrUnexpectedEOF, "cannot connect: unexpected EOF"},
	} {
		err := StartError(errConnect, "Acks leader", tc.err)
		if !errors.Is(err, errConnect) || !errors.Is(err, tc.err) {
			t.Errorf("%s: %v does not wrap the sentinel and the client's error", tc.name, err)
		}
		if msg := err.Error(); msg != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, msg, tc.want)
		}
	}
}
