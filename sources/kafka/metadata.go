package kafka

import "github.com/boulevard-go/boulevard/sources/kafka/internal/claim"

// Metadata is what a handler learns about a Kafka record: every message the
// source delivers carries a *Metadata, read with
// message.MetadataAs[*kafka.Metadata](m). Its fields are Topic and
// Partition (where the record was read), Offset, Key (nil when the record
// has none), Headers (in the order the producer set them), Timestamp
// (create or log-append time, as the topic is configured), GenerationID
// (the consumer-group generation in which the partition was claimed when
// the record was fetched), MemberID (the group member that fetched it) and
// Group (the consumer group, Options.GroupID); Header(key) returns the
// value of the first header named key.
//
// The franz-go source (package franz) delivers the same type, so a handler
// reads records the same way whichever client the pipeline uses.
type Metadata = claim.Metadata

// Header is one record header: Key and Value.
type Header = claim.Header
