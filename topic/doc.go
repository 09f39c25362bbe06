// Package topic is the topic layer: named topics that decouple publishers
// from subscribers, inside a pipeline and between pipelines, and the
// in-memory queues pipeline stages pass messages through.
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
// The building block of the in-memory backend, and of the pipeline stages, is [Queue], a bounded, multi-producer, multi-consumer
// FIFO with balanced delivery: every published item is received by exactly
// one receiver. Producers block (or fail fast with [Queue.TryPublish]) when
// the queue is full, which is how back-pressure propagates from a slow stage
// to the stages before it.
//
// # Blocking and cancellation
//
// The blocking operations ([Queue.Publish], [Queue.PublishBatch],
// [Queue.Receive], [Queue.ReceiveOr]) take a [context.Context]. If the
// context is already done when the call starts, the call returns ctx.Err()
// without publishing or receiving anything; if it becomes done while the
// call is waiting, the call stops waiting and returns ctx.Err(). A cancelled
// Publish leaves nothing in the queue, a cancelled PublishBatch leaves exactly
// the prefix it reports, and a cancelled receive never removes an item. [Queue.ReceiveOr] additionally accepts an alarm
// channel (typically a reusable [time.Timer]'s C) and returns 0, nil when
// the alarm fires before an item arrives, which is what a batcher waiting for
// "the next item or the batch timeout" needs.
//
// # Closing
//
// [Queue.Close] is idempotent. After it, publishing fails with
// [ErrTopicClosed] (blocked publishers are woken and fail too), while
// receivers keep getting the items that are still queued and then get
// [ErrSubscriptionClosed], the end-of-stream signal.
//
// # Performance
//
// A Queue is a mutex-protected ring buffer. Batch operations
// ([Queue.PublishBatch], and [Queue.Receive] with a buffer longer than one)
// take the lock once per batch, not once per item, so batching amortises the
// synchronisation cost. Waiting goroutines park on a per-waiter channel that
// is recycled through a free list inside the queue, so once a queue is warm,
// neither the fast path nor the blocking path allocates. A Queue starts no
// goroutines of its own.
package topic
