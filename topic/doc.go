// Package topic provides the in-memory queues that pipeline stages use to
// pass messages to each other.
//
// The building block is [Queue], a bounded, multi-producer, multi-consumer
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
