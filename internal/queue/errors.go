// Package queue holds the bounded queues that connect a pipeline's stages
// and that the in-memory topic backend is built on.
//
// [Queue] is a bounded, multi-producer, multi-consumer FIFO with balanced
// delivery: every published item is received by exactly one receiver.
// Publishers block (or fail fast with [Queue.TryPublish]) when the queue is
// full, which is how back-pressure propagates from a slow stage to the
// stages before it. [Partitioned] is a set of queues that routes each item
// by key, for PartitionBy.
//
// # Blocking and cancellation
//
// The blocking operations ([Queue.Publish], [Queue.PublishBatch],
// [Queue.Receive], [Queue.ReceiveOr]) take a [context.Context]. If the
// context is already done when the call starts, the call returns ctx.Err()
// without publishing or receiving anything; if it becomes done while the
// call is waiting, the call stops waiting and returns ctx.Err(). A cancelled
// Publish leaves nothing in the queue, a cancelled PublishBatch leaves
// exactly the prefix it reports, and a cancelled receive never removes an
// item. [Queue.ReceiveOr] additionally accepts an alarm channel (typically a
// reusable [time.Timer]'s C) and returns 0, nil when the alarm fires before
// an item arrives, which is what a batcher waiting for "the next item or the
// batch timeout" needs.
//
// # Closing
//
// [Queue.Close] is idempotent. After it, publishing fails with [ErrClosed]
// (blocked publishers are woken and fail too), while receivers keep getting
// the items that are still queued and then get [ErrDrained], the
// end-of-stream signal.
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
package queue

import "errors"

// ErrClosed is returned by the publish operations (Publish, PublishBatch,
// TryPublish, TryPublishBatch, WaitRoom) once the queue has been closed. A
// publisher that is blocked waiting for room when Close is called is woken
// and also gets ErrClosed; the item it was trying to publish is not
// published. The topic broker returns this same value as
// topic.ErrTopicClosed, which is why its text names a topic.
var ErrClosed = errors.New("topic: closed")

// ErrDrained is returned by the receive operations (Receive, ReceiveOr,
// TryReceive) once the queue has been closed and every item that was in it
// has been received. It is the normal end-of-stream signal for a consumer,
// not a failure. The topic broker returns this same value as
// topic.ErrSubscriptionClosed.
var ErrDrained = errors.New("topic: subscription closed")

// ErrTakenSince is returned by [Queue.PutBack] when another receive took
// items from the queue after the one whose items were to go back: putting
// them back ahead of the queue would hand them to a receiver after items
// published later. Nothing is queued then.
var ErrTakenSince = errors.New("queue: items taken since")
