// Package pulsartopic puts topics on Apache Pulsar, through
// github.com/apache/pulsar-client-go: the same declarations (modes,
// groups, policies) as the in-memory backend, with topics that span
// processes and outlive them.
//
// How the topic layer maps onto Pulsar:
//
//   - A topic is one Pulsar topic, persistent://public/default/<name> by
//     default (Options.Tenant, Namespace, NonPersistent, TopicName), non-
//     partitioned or with Options.Partitions partitions. Declaring it
//     checks the partition count on the broker and creates a missing
//     partitioned topic through Options.Admin; declaring a topic that
//     exists with the same count is a no-op, so every process can declare
//     the topics it uses.
//   - A balanced group is a durable Shared subscription named after the
//     group (Key_Shared when Options.Key is set, so that one key's messages
//     reach one member at a time, in order), created at the latest message.
//     Its members are the consumers of any process that subscribe with the
//     group's name.
//   - A broadcast subscriber is an exclusive non-durable subscription of its
//     own, starting at the latest message; it ends when the subscriber
//     closes. A reconnection to the broker starts it again at the latest
//     message: what the client held and had not passed on, and what was
//     published meanwhile, never reaches the subscriber (pulsar-client-go
//     resubscribes a non-durable consumer without a start message id).
//   - Publish sends the message and waits for the broker's receipt, so a
//     publish that returned nil is stored. The producer's pending queue
//     (Options.MaxPendingMessages) is what on_full applies to: block waits
//     for room in it, drop_newest and TryPublish report DroppedOnFull when
//     it is full. Slow consumers never push back on publishers: the topic
//     stores every publish.
//   - Each subscriber reads ahead at most its mode's capacity
//     (balanced.queue_capacity, broadcast.queue_capacity): the consumer's
//     receiver queue and the channel it fills share that bound.
//   - Ack acknowledges the message on the broker: the group never receives
//     it again. Nack asks for it again after Options.NackRedeliveryDelay. A
//     member that closes, or whose process dies, hands what it had not
//     acked back to the group ([topic.FeatureDurable]).
//
// What it does not do, and declares in its capabilities: publishers are not
// slowed by full groups (no FeatureGroupBackpressure), broadcast
// subscribers do not lose messages by falling behind a ring (no
// FeatureBroadcastCapacity; on_lag drop_oldest only, messages are kept by
// the topic's retention), and a publisher does not learn the outcome of a
// message handled by another process (propagation disabled only, so
// ack_mode all and tracked publishers are refused).
package pulsartopic
