// Package kafkatopic puts topics on Apache Kafka, through
// github.com/IBM/sarama: the same declarations (modes, groups, policies)
// as the in-memory backend, with topics that span processes and outlive
// them. New (or NewContext, whose ctx bounds the first connection)
// validates the options, checks that a bootstrap broker answers and
// starts the producer the backend's topics share.
//
// How the topic layer maps onto Kafka:
//
//   - A topic a/b is the Kafka topic a.b (KafkaTopic). Declaring it creates
//     it with Options.Partitions partitions, or checks that the existing
//     one has at least as many (a *PartitionsError otherwise), and reads
//     its max.message.bytes, so that every process can declare the topics
//     it uses.
//   - Publish hands the record to the shared producer and waits for the
//     brokers' acknowledgement (acks=all by default): a publish that
//     returned nil is stored. on_full applies to the producer's buffers.
//     A record larger than the topic accepts fails alone
//     (*RecordTooLargeError), never with the records batched beside it.
//     Slow consumers never push back on publishers: the log takes every
//     record.
//   - Balanced group g of topic a/b is the Kafka consumer group a.b:g
//     (GroupID). Each balanced subscription is one member, on a client of
//     its own; a new group starts at the log end as of its first Subscribe
//     (or, with Options.InitialOffset earliest, at the oldest record, so
//     that what a topic already holds is delivered; its first Subscribe
//     logs one INFO line counting the records it skips or delivers),
//     and offsets are committed as the contiguous prefix of settled
//     messages of each partition, so what a member received and did not
//     settle is delivered again to the group.
//   - A broadcast subscriber reads every partition from the log end, with
//     no consumer group, whatever InitialOffset; on_lag applies when retention removes records it
//     had not read.
//   - Each subscriber reads ahead at most its mode's queue capacity.
//
// What it does not do, and declares in its capabilities: a publisher does
// not learn the outcome of a message handled by another process (tracked
// publishing and ack_mode all are refused), and slow groups do not slow
// publishers. docs/topic-backends.md describes each behaviour, and its
// bounds, in full.
package kafkatopic
