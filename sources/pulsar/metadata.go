package pulsar

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// Metadata is what the source knows about a message; handlers read it with
// message.MetadataAs[*pulsar.Metadata]. The fields are the same for
// individual, batched and chunked messages.
type Metadata struct {
	// MessageID is the id the acknowledger acks with. For a chunked message
	// it covers every chunk.
	MessageID pulsar.MessageID
	// Topic is the topic the message came from: for a partitioned topic, the
	// concrete partition's topic ("…-partition-2").
	Topic string
	// BaseTopic is the topic without its partition suffix, in the fully
	// qualified form the client reports ("persistent://tenant/ns/name"
	// for a configured "name"). Equal to Topic unless the topic is
	// partitioned.
	BaseTopic string
	// Partition is the partition index, or -1 when the topic is not
	// partitioned.
	Partition int32
	// Subscription is the subscription name.
	Subscription string
	// Key is the message's partition key, "" when it has none.
	Key string
	// OrderingKey is the message's ordering key, "" when it has none.
	OrderingKey string
	// Properties are the message's user properties (nil when it has none).
	Properties map[string]string
	// ProducerName is the name of the producer that published it.
	ProducerName string
	// PublishTime is the broker's publish timestamp (millisecond precision).
	PublishTime time.Time
	// EventTime is the application-set event time, the zero time.Time when
	// it was not set.
	EventTime time.Time
	// RedeliveryCount is how many times the broker has redelivered the
	// message (0 on its first delivery).
	RedeliveryCount uint32
	// NullValue reports a tombstone: a message published with no value
	// (Pulsar's null_value, which topic compaction reads as the key's
	// deletion). Its Data is nil.
	NullValue bool
	// Raw is the message as pulsar-client-go returned it, for what the
	// fields above do not cover (schema version, replication, broker
	// publish time, …). Its methods follow the client library.
	Raw pulsar.Message
}

// LogValue describes the message for logs: its topic (the partition's),
// its id (MessageIDString), its key when it has one and its redelivery
// count when it was redelivered. The pipeline's failure lines carry it
// (message.Message.LogValue).
func (m *Metadata) LogValue() slog.Value {
	if m == nil {
		return slog.Value{}
	}
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.String("topic", m.Topic), slog.String("message_id", m.MessageIDString()))
	if m.Key != "" {
		attrs = append(attrs, slog.String("key", m.Key))
	}
	if m.RedeliveryCount > 0 {
		attrs = append(attrs, slog.Uint64("redelivery_count", uint64(m.RedeliveryCount)))
	}
	return slog.GroupValue(attrs...)
}

// Partitioned reports whether the message came from a partitioned topic.
func (m *Metadata) Partitioned() bool { return m.Partition >= 0 }

// MessageIDString returns the message id as Pulsar prints it,
// "ledgerId:entryId:partition", with ":batchIndex" appended for a message
// of a batch of two or more (pulsar-client-go reports a one-message batch
// like an unbatched message); the partition is -1 for a topic that is not
// partitioned. It
// is built on each call (the source does not allocate it per message); use
// it for logs and correlation.
func (m *Metadata) MessageIDString() string {
	if m.MessageID == nil {
		return ""
	}
	return formatID(m.MessageID, m.Partition)
}

func formatID(id pulsar.MessageID, partition int32) string {
	b := make([]byte, 0, 48)
	b = strconv.AppendInt(b, id.LedgerID(), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, id.EntryID(), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(partition), 10)
	if id.BatchSize() > 1 {
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(id.BatchIdx()), 10)
	}
	return string(b)
}

const partitionSuffix = "-partition-"

// splitPartition returns the topic without its partition suffix and the
// partition index, or the topic itself and -1. As for Pulsar (its
// TopicName.getPartitionIndex), the index is a decimal as Pulsar writes
// it: "t-partition-03" or "t-partition-+3" is a topic of its own, not a
// partition of "t".
func splitPartition(topic string) (string, int32) {
	i := strings.LastIndex(topic, partitionSuffix)
	if i < 0 {
		return topic, -1
	}
	idx := topic[i+len(partitionSuffix):]
	n, err := strconv.ParseInt(idx, 10, 32)
	if err != nil || n < 0 || strconv.Itoa(int(n)) != idx {
		return topic, -1
	}
	return topic[:i], int32(n)
}

// topicCache remembers how the last topic name seen was split: the client
// hands out the same few topic strings over and over.
type topicCache struct {
	topic, base string
	part        int32
}

func (c *topicCache) split(topic string) (string, int32) {
	if topic != c.topic || c.topic == "" {
		c.topic = topic
		c.base, c.part = splitPartition(topic)
	}
	return c.base, c.part
}

// fill sets md from msg.
func (md *Metadata) fill(msg pulsar.Message, sub string, tc *topicCache) {
	topic := msg.Topic()
	base, part := tc.split(topic)
	*md = Metadata{
		MessageID:       msg.ID(),
		Topic:           topic,
		BaseTopic:       base,
		Partition:       part,
		Subscription:    sub,
		Key:             msg.Key(),
		OrderingKey:     msg.OrderingKey(),
		Properties:      msg.Properties(),
		ProducerName:    msg.ProducerName(),
		PublishTime:     msg.PublishTime(),
		RedeliveryCount: msg.RedeliveryCount(),
		NullValue:       msg.IsNullValue(),
		Raw:             msg,
	}
	if et := msg.EventTime(); et.UnixMilli() != 0 {
		md.EventTime = et
	}
}

// partitionKey is the message's partition key (message.SetPartitionKey) on
// a subscription of type t, the strings the client's message holds: on
// KeyShared the key the broker routes by, the ordering key or else the key
// ("" for a message with neither, which the broker routes as one key too);
// on Exclusive and Failover the topic, one per partition; on Shared none.
func (md *Metadata) partitionKey(t SubscriptionType) string {
	switch t {
	case KeyShared:
		if md.OrderingKey != "" {
			return md.OrderingKey
		}
		return md.Key
	case Exclusive, Failover:
		return md.Topic
	}
	return ""
}
