package kafka

import "time"

// Metadata is what a handler learns about a Kafka record: every message the
// source delivers carries a *Metadata, read with
// message.MetadataAs[*kafka.Metadata](m).
type Metadata struct {
	// Topic and Partition say where the record was read.
	Topic     string
	Partition int32
	// Offset is the record's offset in its partition.
	Offset int64
	// Key is the record key (nil when the record has none).
	Key []byte
	// Headers are the record headers, in the order the producer set them.
	Headers []Header
	// Timestamp is the record's timestamp (create or log-append time, as the
	// topic is configured).
	Timestamp time.Time
	// GenerationID is the consumer-group generation in which the partition
	// was claimed when the record was fetched.
	GenerationID int32
	// MemberID is the group member that fetched the record.
	MemberID string
}

// Header is one record header.
type Header struct {
	Key   []byte
	Value []byte
}

// Header returns the value of the first header named key, and whether there
// is one.
func (md *Metadata) Header(key string) ([]byte, bool) {
	for _, h := range md.Headers {
		if string(h.Key) == key {
			return h.Value, true
		}
	}
	return nil, false
}
