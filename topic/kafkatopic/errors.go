package kafkatopic

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkarefusal"
)

// ErrConnect is wrapped by the error [New] returns when no broker could be
// reached or a client could not be created.
var ErrConnect = errors.New("kafkatopic: cannot connect to the Kafka cluster")

// ErrPartitions is wrapped by [*PartitionsError].
var ErrPartitions = errors.New("kafkatopic: topic has fewer partitions than configured")

// ErrAdmin is wrapped by the errors of creating or checking a topic and of
// resolving a group's starting offsets.
var ErrAdmin = errors.New("kafkatopic: administrative request failed")

// ErrJoin is wrapped by the error of a balanced Subscribe whose member did
// not join its consumer group within Options.AdminTimeout.
var ErrJoin = errors.New("kafkatopic: consumer group join failed")

// ErrTrackedPublish is returned by a tracked publish (topic.TrackedPublisher)
// into a Kafka topic: the outcome of a message handled in another process
// cannot travel back through this backend, so it refuses the publish
// instead of reporting an outcome it does not know.
var ErrTrackedPublish = errors.New("kafkatopic: tracked publishing is not supported by the kafka backend")

// ErrRevoked is returned by settling (Subscription.Ack or Nack) a message
// whose partition the consumer group had already moved to another member:
// the settlement cannot be committed, and the group delivers the message
// again.
var ErrRevoked = errors.New("kafkatopic: partition revoked before the message was settled; the group delivers it again")

// ErrUnconfirmed is wrapped, with the context's error, by a publish whose
// context ended after the record was handed to the producer and before the
// broker acknowledged it: the record may or may not be stored.
var ErrUnconfirmed = errors.New("kafkatopic: the record was handed to the producer before the context ended and may be stored")

// ErrCorruptBatch is wrapped by the error a subscription's Receive
// returns, balanced or broadcast, once it has handed out what was
// already fetched, when
// a partition of the topic holds a record batch the client cannot decode
// (its CRC does not match, a length or a compression codec that does not
// hold) or the broker answers its fetch with CORRUPT_MESSAGE: fetching
// again returns the same bytes, and skipping them would lose their
// records, so the subscription stops there, as Kafka's Java consumer
// does; a balanced one leaves its group (what it did not ack is
// delivered again).
// The error names the partition and the offset it reads from, and wraps
// sarama's error; the backend logs it once, at ERROR. A topic source
// whose subscription ends so fails, and the pipeline's restart policy
// decides.
var ErrCorruptBatch = errors.New("kafkatopic: record batch cannot be decoded")

// corruptFetch is the error for err, a fetch of topic/part from offset at
// (negative: not known) that cannot be decoded; one past
// sarama.MaxResponseSize says so (kafkarefusal.CorruptFetch).
func corruptFetch(topic string, part int32, at int64, err error) error {
	return kafkarefusal.CorruptFetch(ErrCorruptBatch, topic, part, at, err)
}

// ErrRecordTooLarge is wrapped by [*RecordTooLargeError].
var ErrRecordTooLarge = errors.New("kafkatopic: record larger than the topic accepts")

// RecordTooLargeError is the error of a publish whose record the broker
// refused, sent on its own, as larger than the topic accepts (its
// max.message.bytes, which defaults to the brokers' message.max.bytes):
// the record is not stored. A broker refuses a whole batch for one record
// over the limit; so the backend sends a record over the limit read when
// the topic was declared through a second producer that puts one record in
// each request, and sends each record of a batch the broker refused as too
// large again the same way: the records published with the refused one
// are stored. It wraps both [ErrRecordTooLarge] and
// sarama.ErrMessageSizeTooLarge.
type RecordTooLargeError struct {
	// Topic is the Kafka topic name.
	Topic string
	// Size is the record's size as the broker measures it: the bytes of a
	// record batch holding only this record, uncompressed (a producer
	// configured to compress sends fewer).
	Size int
	// Limit is the topic's max.message.bytes as read when the topic was
	// declared, or 0 when it could not be read, or when the broker refused
	// a record no larger than it (the topic's setting has changed since).
	Limit int
}

// Error names the topic, the record's size and, when known, the limit.
func (e *RecordTooLargeError) Error() string {
	if e.Limit > 0 {
		return fmt.Sprintf("kafkatopic: record of %d bytes refused: topic %q accepts at most %d (max.message.bytes)", e.Size, e.Topic, e.Limit)
	}
	return fmt.Sprintf("kafkatopic: record of %d bytes refused: larger than topic %q accepts (max.message.bytes)", e.Size, e.Topic)
}

// Unwrap returns ErrRecordTooLarge and sarama.ErrMessageSizeTooLarge.
func (e *RecordTooLargeError) Unwrap() []error {
	return []error{ErrRecordTooLarge, sarama.ErrMessageSizeTooLarge}
}

// PartitionsError reports an existing topic with fewer partitions than
// Options.Partitions. It wraps [ErrPartitions].
type PartitionsError struct {
	// Topic is the Kafka topic name.
	Topic string
	// Have is the topic's partition count.
	Have int32
	// Want is Options.Partitions.
	Want int32
}

// Error names the topic and both counts.
func (e *PartitionsError) Error() string {
	return fmt.Sprintf("kafkatopic: topic %q has %d partition(s), fewer than the %d configured", e.Topic, e.Have, e.Want)
}

// Unwrap returns ErrPartitions.
func (e *PartitionsError) Unwrap() error { return ErrPartitions }
