package pulsartest

import (
	"errors"
	"fmt"
)

// ErrUnknownMessage is wrapped by the error of SetRedeliveryCount when the
// topic, the subscription or the message it names does not exist.
var ErrUnknownMessage = errors.New("pulsartest: unknown topic, subscription or message")

// SetRedeliveryCount sets the redelivery count the broker keeps for the
// message id on subscription of topic (for a message of a partitioned
// topic, pass the partition's name, PartitionTopic), as if the broker had
// redelivered it n times: its next deliveries carry n, and a redelivery
// request raises it from there. It is a fault hook for tests of what a
// client does with a message that has come back very many times (a
// backoff policy at its bounds, a dead-letter threshold), which would
// otherwise take hours of redeliveries. Like a real broker, the broker
// forgets every count of a subscription when its last consumer leaves, so
// set it while a consumer is attached. It returns an error wrapping
// ErrUnknownMessage when the topic, the subscription or the entry does not
// exist, and ErrClosed once the broker is closed.
func (b *Broker) SetRedeliveryCount(topic, subscription string, id MessageID, n uint32) error {
	return b.change(topic, func(tn topicName) error {
		t := b.topics[tn.full]
		if t == nil || t.subs[subscription] == nil || id.LedgerID != t.ledger || id.EntryID >= uint64(len(t.entries)) {
			return fmt.Errorf("pulsartest: set the redelivery count of %v on %q, subscription %q: %w", id, tn.full, subscription, ErrUnknownMessage)
		}
		t.subs[subscription].redelivery[id.EntryID] = n
		return nil
	})
}
