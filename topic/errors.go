package topic

import "errors"

// ErrTopicClosed is returned by the publish operations (Publish,
// PublishBatch, TryPublish) once the queue or topic has been closed. A
// publisher that is blocked waiting for room when Close is called is woken
// and also gets ErrTopicClosed; the item it was trying to publish is not
// published.
var ErrTopicClosed = errors.New("topic: closed")

// ErrSubscriptionClosed is returned by the receive operations (Receive,
// ReceiveOr, TryReceive) once the queue has been closed and every item that
// was in it has been received. It is the normal end-of-stream signal for a
// consumer, not a failure.
var ErrSubscriptionClosed = errors.New("topic: subscription closed")
