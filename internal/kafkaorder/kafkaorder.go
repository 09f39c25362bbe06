// Package kafkaorder configures the sarama clients the Kafka topic and
// topology backends produce through, so that what they publish to a
// partition is stored once each, in the order it was sent.
package kafkaorder

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// Producer returns a copy of cfg for a client that produces. It has one
// request at a time on each broker connection (Net.MaxOpenRequests 1),
// whatever cfg says, so that a retried batch is never overtaken by a
// later one to its partition. And, when cfg allows it (RequiredAcks
// WaitForAll, Version 0.11 or later, Producer.Retry.Max at least 1), the
// producer is idempotent (Producer.Idempotent): the broker numbers each
// producer's batches and stores a batch it already stored (a retry after
// a REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND, or after a
// connection lost once the broker had written the batch) only once.
// Without it (acks leader or none, or no retries), a retried batch the
// broker had already stored is stored again, after the records it
// carried.
func Producer(cfg *sarama.Config) *sarama.Config {
	c := *cfg
	c.Net.MaxOpenRequests = 1
	if c.Producer.RequiredAcks == sarama.WaitForAll && c.Version.IsAtLeast(sarama.V0_11_0_0) && c.Producer.Retry.Max >= 1 {
		c.Producer.Idempotent = true
	}
	return &c
}

// StartError is the error of making a producer that failed with err
// (credentials already taken out): kind wrapping err. When the cluster
// refused the producer id an idempotent producer asks for as it is made
// (sarama.ErrClusterAuthorizationFailed), or the transactional id of a
// transactional one (sarama.ErrTransactionalIDAuthorizationFailed), it
// says so and what to grant: WRITE on a topic from Kafka 2.8 (KIP-679),
// the cluster permission IdempotentWrite before, or WRITE on the
// transactional id; or to turn idempotence off, by off, the backend's
// options for it.
func StartError(kind error, off string, err error) error {
	switch {
	case errors.Is(err, sarama.ErrClusterAuthorizationFailed):
		return fmt.Errorf("%w: the cluster refused the idempotent producer a producer id: grant the principal WRITE on a topic (Kafka 2.8 and later) or IdempotentWrite on the cluster, or turn idempotence off (%s): %w",
			kind, off, err)
	case errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed):
		return fmt.Errorf("%w: the cluster refused the producer its transactional id: grant the principal WRITE on the transactional id (Config.Producer.Transaction.ID): %w",
			kind, err)
	}
	return fmt.Errorf("%w: %w", kind, err)
}
