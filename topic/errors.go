package topic

import (
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/topic/internal/quote"
)

// ErrTopicClosed is returned by the publish operations (Publish,
// PublishWith, PublishWithHeaders, TryPublish) once the topic has been
// closed. A publisher
// that is blocked waiting for room when Close is called is woken and also
// gets ErrTopicClosed; the item it was trying to publish is not published.
// It is the same value as the closed error of the queues the in-memory
// backend is built on.
var ErrTopicClosed = queue.ErrClosed

// ErrSubscriptionClosed is returned by the receive operations once the
// subscription or its topic has been closed and every item delivered to it
// has been received. It is the normal end-of-stream signal for a consumer,
// not a failure.
var ErrSubscriptionClosed = queue.ErrDrained

// ErrNilContext is returned by every call of this package that takes a
// context ([Broker.CreateTopicsContext], [NewTopicContext], the publish
// and subscribe calls of [Handle], [Binding] and [TrackedPublisher], the
// receive calls of [Subscription] and [Receipt.Wait]) when that context is
// nil. Nothing is created, published, subscribed or received then. A
// [Handle] never passes a nil context to its backend.
var ErrNilContext = errors.New("topic: nil context")

// ErrEmptyName is returned by [NewName] and [NewGroupName] (and by every
// call that takes a name) for an empty name.
var ErrEmptyName = errors.New("topic: empty name")

// ErrInvalidName is wrapped by the [*NameError] returned for a topic, group
// or alias name that breaks the rules of [Name] or [GroupName].
var ErrInvalidName = errors.New("topic: invalid name")

// NameError reports a name outside the rules of [Name] (topics and aliases)
// or [GroupName] (consumer groups). It wraps [ErrInvalidName].
type NameError struct {
	// Kind is "topic", "group" or "alias".
	Kind string
	// Name is the rejected name.
	Name string
	// Reason says which rule it breaks.
	Reason string
}

// Error returns, for example, `topic: invalid group name "a b": has " " at
// byte 1; a name is …`, the name quoted and escaped.
func (e *NameError) Error() string {
	return "topic: invalid " + e.Kind + " name " + quote.Value(e.Name) + ": " + e.Reason
}

// Unwrap returns ErrInvalidName.
func (e *NameError) Unwrap() error { return ErrInvalidName }

// ErrTopicExists is returned (wrapped in a [*TopicError]) by
// [Broker.CreateTopic] and [Broker.CreateTopics] when a topic of that name
// is already registered, or a batch names the same topic twice.
var ErrTopicExists = errors.New("topic: already exists")

// ErrSubscribeBalancedNotSupported is returned by [Handle.Subscribe] when a
// balanced subscription is requested on a broadcast-only topic.
var ErrSubscribeBalancedNotSupported = errors.New("topic: balanced subscription not supported by this topic's mode")

// ErrSubscribeBroadcastNotSupported is returned by [Handle.Subscribe] when a
// broadcast subscription is requested on a balanced-only topic.
var ErrSubscribeBroadcastNotSupported = errors.New("topic: broadcast subscription not supported by this topic's mode")

// ErrSubscribeSingleGroupViolation is returned by [Handle.Subscribe] when a
// balanced-only topic, whose one consumer group is fixed by its first
// balanced subscription, is asked for a subscription in another group.
var ErrSubscribeSingleGroupViolation = errors.New("topic: balanced-only topic already has a different consumer group")

// ErrMessageNotTracked is returned by [Subscription.Ack] and
// [Subscription.Nack] for a message ID that was not published through a
// tracked publisher, that this subscription did not receive, or whose
// outcome is already settled (acked or nacked before, timed out, resolved by
// another subscriber under ack_mode first, or the topic closed).
var ErrMessageNotTracked = errors.New("topic: message not tracked")

// ErrUnsupportedBackend is wrapped by the [*UnsupportedError] returned when a
// topic names a backend that does not exist.
var ErrUnsupportedBackend = errors.New("topic: unsupported backend")

// ErrUnsupportedMode is wrapped by the [*UnsupportedError] returned when a
// backend does not support the topic's mode.
var ErrUnsupportedMode = errors.New("topic: unsupported mode")

// ErrUnsupportedPolicy is wrapped by the [*UnsupportedError] returned when a
// backend does not support one of the topic's policies.
var ErrUnsupportedPolicy = errors.New("topic: unsupported policy")

// ErrNoSubscribers is the Nack reason of a tracked publish that reached no
// subscriber at all (no consumer group and no broadcast subscriber when it
// was published, including an empty eligible set under ack_mode all).
var ErrNoSubscribers = errors.New("topic: no subscriber to deliver to")

// ErrDeliveryDropped is the Nack reason of a tracked publish whose delivery
// a subscriber dropped without acking it: the subscription was closed with
// the message received but unacked, or before receiving it.
var ErrDeliveryDropped = errors.New("topic: delivery dropped by subscriber")

// ErrLagged is the Nack reason of a tracked publish that a slow broadcast
// subscriber missed because the ring overwrote it.
var ErrLagged = errors.New("topic: broadcast subscriber lagged")

// ErrPublisherClosed is returned by the publish methods of a closed
// [TrackedPublisher], and is the Reason of the receipts it resolved as
// [TopicClosed] when it was closed.
var ErrPublisherClosed = errors.New("topic: tracked publisher closed")

// ErrEmptyDst is returned, at once, by [Subscription.ReceiveBatch] given
// a dst of length 0 (nil or not): nothing is received.
var ErrEmptyDst = errors.New("topic: ReceiveBatch into a dst of length 0")

// ErrBrokerClosed is wrapped by the error [Broker.CreateTopic],
// [Broker.CreateTopics] and the like return once [Broker.Close] was
// called: a closed broker registers no topic, since nothing would close it.
var ErrBrokerClosed = errors.New("topic: broker closed")

// ErrNotCreated is wrapped by the errors the methods of a [Handle],
// [Subscription], [TrackedPublisher] or [Receipt] return when the value
// was not made by its constructor ([Broker.CreateTopic], [NewTopic] and the
// like, [Handle.Subscribe], [Handle.Tracked], a tracked publish): a zero
// value, declared with var, has no topic behind it. Nothing is published,
// received or settled then.
// [TopicSet.Bind] wraps it too when called on a nil *TopicSet.
var ErrNotCreated = errors.New("topic: not created by its constructor")

// ErrNoBackendState is wrapped by the error [Broker.CreateTopic],
// [NewTopic] and [Handle.Subscribe] return when the topic's backend
// answered its NewTopic or Subscribe with neither a state (a nil
// interface, or a nil pointer in one) nor an error,
// which breaks the [Backend] contract; the error names the backend.
// Nothing is created or subscribed then.
var ErrNoBackendState = errors.New("topic: backend returned neither a state nor an error")

// The errors of the zero values, made once so that returning them does not
// allocate.
var (
	errZeroHandle       = fmt.Errorf("topic: zero Handle (make one with Broker.CreateTopic or NewTopic): %w", ErrNotCreated)
	errZeroSubscription = fmt.Errorf("topic: zero Subscription (make one with Handle.Subscribe): %w", ErrNotCreated)
	errZeroTracked      = fmt.Errorf("topic: zero TrackedPublisher (make one with Handle.Tracked): %w", ErrNotCreated)
	errZeroReceipt      = fmt.Errorf("topic: zero Receipt (tracked publishers make them): %w", ErrNotCreated)
)

// ErrUnknownOnFull is wrapped by the error [Handle.PublishWith] and
// [Handle.PublishWithHeaders] (and so [Binding.Publish]) return for an
// OnFull other than [Block] and [DropNewest]; the error names the value.
// Nothing is published then.
var ErrUnknownOnFull = errors.New("topic: unknown on_full policy")

// TopicError names the topic an operation failed on. It wraps the cause
// (for example [ErrTopicExists]).
type TopicError struct {
	// Topic is the topic's name.
	Topic Name
	// Err is the cause, returned by Unwrap.
	Err error
}

// Error returns "topic <name>: <cause>"; a name that is not valid is shown
// quoted and escaped (see [SafeName]).
func (e *TopicError) Error() string {
	return "topic " + SafeName(string(e.Topic)) + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *TopicError) Unwrap() error { return e.Err }

// UnsupportedError reports a capability a backend lacks. Err is one of
// [ErrUnsupportedBackend], [ErrUnsupportedMode] or [ErrUnsupportedPolicy].
type UnsupportedError struct {
	// Backend is the backend's name, for example "in_memory".
	Backend string
	// What names the setting, for example "mode" or "broadcast.on_lag".
	What string
	// Value is the requested value, for example "mixed".
	Value string
	// Err is the sentinel.
	Err error
}

// Error describes the unsupported combination, with the backend's name and
// the value quoted and escaped.
func (e *UnsupportedError) Error() string {
	if errors.Is(e.Err, ErrUnsupportedBackend) {
		return "topic: unsupported backend " + quote.Value(e.Backend)
	}
	return "topic: backend " + quote.Value(e.Backend) + " does not support " + e.What + " " + quote.Value(e.Value)
}

// Unwrap returns the sentinel.
func (e *UnsupportedError) Unwrap() error { return e.Err }
