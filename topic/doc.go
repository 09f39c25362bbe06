// Package topic is the topic layer: named topics that decouple publishers
// from subscribers, inside a pipeline and between pipelines, with the
// backend contract and the in-memory backend. (The queues between a
// pipeline's stages are internal/queue's, which the in-memory backend
// uses too.)
//
// # Topics
//
// A [Broker] registers named topics ([Broker.CreateTopic],
// [Broker.CreateTopics], which is atomic). A topic ([Handle]) runs in one of
// three modes chosen by [Options.Mode]:
//
//   - [BalancedOnly]: one consumer group; each message goes to exactly one
//     member ([Balanced] subscriptions). Group queues are bounded:
//     [Handle.Publish] waits for room, [Handle.TryPublish] reports
//     [DroppedOnFull].
//   - [BroadcastOnly]: every subscriber ([Broadcast]) receives every message
//     published after it subscribed, through a bounded ring; a slow
//     subscriber is told how many messages it missed (Item.Lagged) and either
//     continues ([DropOldest]) or is disconnected ([Disconnect]). The
//     publisher never waits for broadcast subscribers.
//   - [Mixed]: any number of groups plus broadcast subscribers; a publish
//     reaches all of them or none.
//
// A [TrackedPublisher] reports the terminal outcome of each publish (Acked,
// Nacked, TimedOut, TopicClosed), fed by subscribers' [Subscription.Ack] and
// [Subscription.Nack]; [AckAll] makes a broadcast publish wait for every
// subscriber that was connected when it was published. Backends implement
// [Backend] and declare [Capabilities], checked once when a topic is created.
// The [InMemory] backend is built in; package topictest is the conformance
// suite a backend must pass. docs/topics.md describes the semantics in full.
//
// # Queues
//
// The in-memory backend keeps each balanced group in a bounded FIFO queue
// (the same kind that connects a pipeline's stages): a publisher blocks (or
// fails fast with TryPublish) while the group's queue is full, which is how
// back-pressure reaches publishers. Closing a topic wakes blocked
// publishers, which get [ErrTopicClosed]; subscribers keep receiving what
// was delivered to them and then get [ErrSubscriptionClosed].
package topic
