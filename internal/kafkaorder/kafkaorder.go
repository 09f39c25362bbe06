// Package kafkaorder configures the sarama clients the Kafka topic and
// topology backends produce through, so that what they publish to a
// partition is stored once each, in the order it was sent.
package kafkaorder

import "github.com/IBM/sarama"

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
