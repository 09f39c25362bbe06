package pulsartopology

import (
	"encoding/binary"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/internal/lettersize"
)

// The fields of Pulsar's MessageMetadata that a message of the backend
// carries. pulsar-client-go counts a message's size as its payload and
// its encoded metadata together, and refuses one over the broker's
// maxMessageSize.
const (
	fieldProducerName     protowire.Number = 1
	fieldSequenceID       protowire.Number = 2
	fieldPublishTime      protowire.Number = 3
	fieldProperties       protowire.Number = 4
	fieldPartitionKey     protowire.Number = 6
	fieldUncompressedSize protowire.Number = 9
	fieldDeliverAtTime    protowire.Number = 19
	fieldNullValue        protowire.Number = 25
)

// producerNameSlack is what the name the broker gives a later producer of
// a topology's topics may add to the longest name it gave the producers
// Declare made: a broker names a producer after its cluster, itself and a
// counter, whose digits (at most a uint64's 20) may have grown.
const producerNameSlack = 20

// reserveKeys are the properties a hold or a dead-lettering writes, for
// lettersize.Reserve.
var reserveKeys = lettersize.Keys{Shard: PropShard, Retries: PropRetries, FirstFailure: PropFirstFailure,
	LastFailure: PropLastFailure, Resume: PropResume, Group: PropGroup,
	DeathReason: PropDeathReason, DeathError: PropDeathError, DeathTopic: PropDeathTopic, DeathGroup: PropDeathGroup,
	DeathRetries: PropDeathRetries, DeathFirstFailure: PropDeathFirstFailure, DeathLastFailure: PropDeathLastFailure,
	ResumeValue: "true"}

// reserve returns what the message of a letter of topology t published to
// its main topic can grow by, as pulsar-client-go counts a message's size,
// once a hold or a dead-lettering sends it again: every property of the
// history and of a Death at its largest (lettersize.Reserve), and the
// metadata fields the client writes at their largest: the producer's name
// (name bytes, the longest of the topology's producers', and
// producerNameSlack), the sequence id, the publish time, the uncompressed
// size, a hold's delivery time and the flag of an empty payload. The
// letter's own key and properties are counted by messageSize.
func reserve(t *topology.Topology, name int) int {
	varint := func(f protowire.Number) int { return protowire.SizeTag(f) + binary.MaxVarintLen64 }
	return lettersize.Reserve(reserveKeys, t, propertySize) +
		protowire.SizeTag(fieldProducerName) + protowire.SizeBytes(name+producerNameSlack) +
		varint(fieldSequenceID) + varint(fieldPublishTime) + varint(fieldUncompressedSize) + varint(fieldDeliverAtTime) +
		protowire.SizeTag(fieldNullValue) + 1
}

// propertySize is the size of a property of key and a value of n bytes in
// a message's metadata.
func propertySize(key string, n int) int {
	kv := protowire.SizeTag(1) + protowire.SizeBytes(len(key)) + protowire.SizeTag(2) + protowire.SizeBytes(n)
	return protowire.SizeTag(fieldProperties) + protowire.SizeBytes(kv)
}

// messageSize returns what m takes of its message's size as Pulsar counts
// it: its payload, and its key and properties as the metadata encodes
// them.
func messageSize(m *pulsar.ProducerMessage) int {
	n := len(m.Payload)
	if m.Key != "" {
		n += protowire.SizeTag(fieldPartitionKey) + protowire.SizeBytes(len(m.Key))
	}
	for k, v := range m.Properties {
		n += propertySize(k, len(v))
	}
	return n
}
