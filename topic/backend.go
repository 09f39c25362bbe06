package topic

import (
	"context"
	"slices"
)

// Capabilities is what a backend supports. Topic creation checks a topic's
// options against it with [CheckCapabilities] before the backend is asked to
// create anything; publish and receive never look at it.
type Capabilities struct {
	// Modes the backend can run.
	Modes []Mode
	// OnFull policies for balanced groups.
	OnFull []OnFull
	// OnLag policies for broadcast subscribers.
	OnLag []OnLag
	// AckModes for broadcast tracked publishes.
	AckModes []AckMode
	// Propagation modes.
	Propagation []PropagationMode
	// Features are the behaviours beyond modes and policies that the
	// backend has; see [Feature].
	Features []Feature
}

// Feature is a behaviour a backend may or may not have. The in-memory
// backend has [FeatureGroupBackpressure] and [FeatureBroadcastCapacity]; a
// backend on a distributed log has [FeatureDurable] instead. Features are
// not options: a topic's options never ask for one, so topic creation does
// not check them; they tell users (and the conformance suite, package
// topictest) which guarantees hold.
type Feature int

const (
	// FeatureGroupBackpressure means a balanced group's queue holds at most
	// balanced.capacity messages, and a publish waits for room in it
	// (on_full block) or is dropped (drop_newest) when it is full, so slow
	// consumers push back on publishers. A log stores every publish and does
	// not push back for slow consumers; there balanced.capacity bounds each
	// member's read-ahead instead.
	FeatureGroupBackpressure Feature = iota
	// FeatureBroadcastCapacity means a broadcast subscriber that falls
	// broadcast.capacity messages behind misses messages, as on_lag says. A
	// log keeps messages by retention instead: a subscriber misses messages
	// only when it falls below the start of the log.
	FeatureBroadcastCapacity
	// FeatureDurable means deliveries are settled with the backend. A message
	// a balanced member acked is never delivered to its group again; one it
	// nacked, or received and did not settle before it closed (or its
	// process died), is delivered again to a member of the group. Messages
	// survive the publishing and subscribing processes.
	FeatureDurable
)

var featureNames = []string{"group_backpressure", "broadcast_capacity", "durable"}

// String returns "group_backpressure", "broadcast_capacity" or "durable".
func (f Feature) String() string { return enumString(featureNames, int(f), "Feature") }

// Features returns every feature, in declaration order.
func Features() []Feature {
	return []Feature{FeatureGroupBackpressure, FeatureBroadcastCapacity, FeatureDurable}
}

// Has reports whether c declares f.
func (c Capabilities) Has(f Feature) bool { return slices.Contains(c.Features, f) }

// CheckCapabilities reports the first setting of o that c does not support,
// as an [*UnsupportedError] wrapping [ErrUnsupportedMode] or
// [ErrUnsupportedPolicy]; backend is the backend's name, used in the
// message. A backend that supports no mode at all is reported as
// [ErrUnsupportedBackend]. Policies that the mode does not use (on_full on a
// broadcast-only topic, on_lag and ack_mode on a balanced-only topic) are not
// checked.
func CheckCapabilities(backend string, c Capabilities, o Options) error {
	if len(c.Modes) == 0 {
		return &UnsupportedError{Backend: backend, Err: ErrUnsupportedBackend}
	}
	if !slices.Contains(c.Modes, o.Mode) {
		return &UnsupportedError{Backend: backend, What: "mode", Value: o.Mode.String(), Err: ErrUnsupportedMode}
	}
	policy := func(what, value string) error {
		return &UnsupportedError{Backend: backend, What: what, Value: value, Err: ErrUnsupportedPolicy}
	}
	if o.Mode != BroadcastOnly && !slices.Contains(c.OnFull, o.Balanced.OnFull) {
		return policy("balanced.on_full", o.Balanced.OnFull.String())
	}
	if o.Mode != BalancedOnly {
		if !slices.Contains(c.OnLag, o.Broadcast.OnLag) {
			return policy("broadcast.on_lag", o.Broadcast.OnLag.String())
		}
		if !slices.Contains(c.AckModes, o.Broadcast.AckMode) {
			return policy("broadcast.ack_mode", o.Broadcast.AckMode.String())
		}
	}
	if !slices.Contains(c.Propagation, o.AckPropagation.Mode) {
		return policy("ack_propagation.mode", o.AckPropagation.Mode.String())
	}
	return nil
}

// Backend creates the per-topic state of one kind of topic implementation.
// [InMemory] is the built-in one; packages topic/kafkatopic and
// topic/pulsartopic put topics on Kafka and Pulsar.
type Backend[T any] interface {
	// Name is the backend's configuration name ("in_memory").
	Name() string
	// Capabilities declares what the backend supports.
	Capabilities() Capabilities
	// NewTopic creates the state of one topic. opts have had defaults
	// applied and passed validation and the capability check. ctx bounds
	// whatever the backend does on a broker to declare the topic; declaring
	// a topic that already exists with compatible settings succeeds.
	NewTopic(ctx context.Context, name Name, opts Options) (State[T], error)
}

// BackendByName returns the built-in backend registered under name
// ("in_memory"), or an [*UnsupportedError] wrapping [ErrUnsupportedBackend].
func BackendByName[T any](name string) (Backend[T], error) {
	if name == (InMemory[T]{}).Name() {
		return InMemory[T]{}, nil
	}
	return nil, &UnsupportedError{Backend: name, Err: ErrUnsupportedBackend}
}

// State is the backend side of one topic. [Handle] wraps it; users never
// call it directly. All methods must be safe for concurrent use.
//
// Delivery contract: a publish reaches every current recipient (each
// balanced group once, each broadcast subscriber once) or none of them.
// Before an envelope becomes visible to any subscriber, the backend calls
// e.Ticket.SetRecipients with the number of deliveries it makes (a nil
// Ticket accepts the call). Whenever a delivery of a tracked envelope is
// lost before a subscriber received it (a lagging subscriber missed it, a
// subscription or group went away with it still queued), the backend calls
// e.Ticket.Drop once per lost delivery, without holding its own locks.
//
// Headers contract: a backend carries e.Headers (see [Envelope.Headers])
// with the message and hands them, with the same keys and values, to every
// subscriber that receives it, tracked or not. It never changes the map it
// is given.
type State[T any] interface {
	// Publish delivers e, waiting for room when onFull is Block. It returns
	// Published, or DroppedOnFull (onFull DropNewest and a group queue is
	// full), or an error: ctx.Err() or ErrTopicClosed. On an error or
	// DroppedOnFull nothing was delivered.
	Publish(ctx context.Context, e Envelope[T], onFull OnFull) (PublishOutcome, error)
	// TryPublish is Publish without waiting for room: DroppedOnFull when a
	// group queue is full. No ctx bounds it: a backend that waits for a
	// broker's answer bounds that wait itself (a send timeout).
	TryPublish(e Envelope[T]) (PublishOutcome, error)
	// Subscribe adds a subscriber, or returns one of the ErrSubscribe*
	// errors or ErrTopicClosed. ctx bounds whatever the backend does on a
	// broker to subscribe: once ctx ends the call returns an error wrapping
	// ctx.Err(), having subscribed nothing (what it made is closed, at once
	// or when a call on the broker it could not interrupt returns). With
	// ctx already ended it subscribes nothing and returns ctx.Err().
	Subscribe(ctx context.Context, mode SubscriptionMode, opts SubscriberOptions) (SubscriptionState[T], error)
	// Stats returns the backend-side counters.
	Stats() StateStats
	// Close closes the topic: publishes fail with ErrTopicClosed, receivers
	// drain what was delivered to them and then get ErrSubscriptionClosed.
	// Idempotent. No ctx bounds it: a backend that waits for a broker
	// returns within timeouts of its own even when the broker does not
	// answer.
	Close()
}

// StateStats are the counters a backend keeps.
type StateStats struct {
	// BalancedGroups is the number of consumer groups with subscribers.
	BalancedGroups int
	// BroadcastSubscribers is the number of connected broadcast subscribers.
	BroadcastSubscribers int
	// Lagged is the total number of messages broadcast subscribers missed.
	Lagged uint64
	// Undecodable is the number of messages this process's subscriptions
	// received that the topic's codec could not decode (an error, a panic
	// or a Goexit in Decode): each is counted here, logged at WARN (a
	// burst on one partition in a few lines: the first in full, then the
	// count held back, held_back, with the first and last position) and
	// skipped for good, a durable backend committing or acknowledging
	// past it. The in-memory backend, which keeps values, has none.
	Undecodable uint64
	// BroadcastResubscribes is the number of times this process's
	// broadcast subscribers subscribed again after their connection to
	// the broker dropped or the topic moved (a Pulsar subscriber, one per
	// topic partition): a subscriber does not resume where it stood, so
	// each may have missed what was published while it was away, and is
	// logged at WARN. The in-memory backend has none.
	BroadcastResubscribes uint64
	// Partitions are the partitions this process's balanced subscribers
	// claim and its broadcast subscribers read, with their lag, ordered
	// by group and partition (a broadcast subscriber's, Group "", first);
	// a partition that several subscribers read is listed once per
	// reader: of broadcast subscribers, each reading it all along, the
	// one furthest behind (least Committed, then HighWater) first; of two
	// members of a group that claim it for a moment of a rebalance, the
	// one furthest ahead (greatest Committed, then HighWater) first, as
	// the group's committed offset only moves forward; of readers tied
	// on these, the one whose fetches fail first. Filled by the
	// durable backends that know their topics' partitions: kafkatopic.
	// pulsartopic and the in-memory backend leave it empty.
	Partitions []PartitionStats
}

// PartitionStats is one partition of a topic that a balanced subscriber
// of this process claims, or a broadcast subscriber reads, with its lag
// read the way the Kafka source's (package sources/kafka) is. Offsets are
// the backend's (Kafka offsets: the offset of the next record to read, as
// Kafka commits them).
type PartitionStats struct {
	// Group is the balanced subscriber's group as the backend names it
	// (kafkatopic: the Kafka consumer group, kafkatopic.GroupID); empty
	// for a broadcast subscriber, which reads without one.
	Group string
	// Partition is the partition.
	Partition int32
	// Committed is the group's committed offset as the claim began (-1
	// when it had none), then the end of the contiguous prefix of
	// messages the subscriber settled, which the backend commits (Kafka:
	// marks for commit, committed within
	// Config.Consumer.Offsets.AutoCommit.Interval, so Committed may run
	// ahead of the broker's offset by that interval). A broadcast
	// subscriber commits nothing: its Committed is its position, the
	// offset after the last record it handed out (Receive) or skipped (a
	// record that does not decode), or the oldest record kept once it
	// handed out the lag notice of the records it missed (drop_oldest),
	// or the oldest record of the partition once its topic was created
	// again, the log end as of its Subscribe before any.
	Committed int64
	// HighWater is the partition's high-water mark (the offset the next
	// published message gets) as of the latest fetch response, or the log
	// end the backend listed last if greater (kafkatopic:
	// Options.HighWaterInterval): a subscriber whose read-ahead is full
	// (one that does not receive) stops fetching, and the messages
	// published meanwhile count once listed. 0 before either.
	HighWater int64
	// Lag is HighWater − Committed: the messages a restart would read
	// again or for the first time (a broadcast subscriber's: the messages
	// published that it has not handed out yet, which a restart would not
	// deliver at all, a new broadcast subscriber starting at the log
	// end); while the group has no committed offset, HighWater − the
	// offset the claim started at (a claim that starts at the oldest
	// record kept: the whole log until it fetches a record, then from
	// that record's offset). 0 while HighWater is unknown, and never
	// negative.
	Lag int64
	// FetchErr is the error of the partition's last failed fetch while
	// its fetches fail (kafkatopic: sarama.ErrTopicAuthorizationFailed,
	// wrapped, for a topic an ACL denies the subscriber READ on; the
	// cluster out of reach): HighWater then grows only as the backend
	// lists the log ends, which the brokers may refuse too, or not
	// answer. Nil once a fetch returns records, or once the fetches have
	// gone on without failing for the longer of 3 s and twice
	// Consumer.Retry.Backoff (sarama does not report a fetch that
	// returns nothing), and for a partition whose fetches have not
	// failed. Not in the JSON form.
	FetchErr error `json:"-"`
}

// ReachObserver hears from a topic's backend whether one subscription can
// read from its broker: a subscriber sets it as [SubscriberOptions].Reach.
// A pipeline source (package topic/source) passes it on to the producer
// stages that receive through the subscription, whose state is then
// "degraded" while it cannot read. A topology's reader reports to one
// too (topology.ReachReporter).
//
// A backend on a broker calls Degrade once its client shows that the
// subscription cannot read (kafkatopic: a balanced member's group
// sessions that keep failing, or a client, a member's or a broadcast
// subscriber's, that reached no broker, while fetches that fail with the
// cluster answering are retried and report nothing; pulsartopic: a
// consumer whose reconnection attempts keep failing), and again at later
// failures while that lasts; then Recovered once it reads again. A
// backend that cannot tell (the in-memory one, whose subscriptions have
// no broker to lose) never calls it. Calls for one subscription come one
// at a time, from the backend's goroutines (never from a call of the
// subscriber into the subscription), possibly before Subscribe has
// returned and while the subscription closes; they must not block nor
// call back into the subscription. On the Kafka and Pulsar backends a
// call that panics or ends its goroutine (runtime.Goexit) is logged at
// error level and the subscription goes on.
type ReachObserver interface {
	// Degrade reports that the subscription cannot read from its broker;
	// err says why.
	Degrade(err error)
	// Recovered reports that the subscription, which Degrade reported
	// unable to read, reads again.
	Recovered()
}

// SubscriptionState is the backend side of one subscription.
type SubscriptionState[T any] interface {
	// Receive waits for at least one envelope and fills dst[:n] with up to
	// len(dst) of them, in order. An envelope with Lagged > 0 is a lag
	// notice carrying no value. After the subscription or topic is closed
	// and drained it returns 0, ErrSubscriptionClosed; on ctx done 0,
	// ctx.Err() with nothing consumed. It is not called concurrently for
	// one subscription.
	Receive(ctx context.Context, dst []Envelope[T]) (int, error)
	// Settle reports the outcome of a received message: reason nil for an
	// ack, non-nil for a nack. A backend with [FeatureDurable] commits acked
	// messages (a log: once every earlier message of the partition is
	// settled) and delivers nacked ones again, and returns nil; one that
	// does not settle deliveries (in memory), or does not know id, or
	// settled it already, returns ErrMessageNotTracked. It may be called
	// from any goroutine, concurrently with Receive. No ctx bounds it: it
	// does not wait for a broker's answer.
	Settle(id MessageID, reason error) error
	// Close removes the subscriber; deliveries it had not received are
	// dropped (Ticket.Drop). Idempotent; may be called concurrently with
	// Receive, which then returns ErrSubscriptionClosed. No ctx bounds it:
	// a backend that waits for a broker returns within timeouts of its own
	// even when the broker does not answer.
	Close()
}

// Envelope is one message as a backend carries it.
type Envelope[T any] struct {
	// ID identifies the message: within its topic for the in-memory
	// backend; a backend that settles deliveries may number them per
	// subscription instead (IDs must be unique within one subscription).
	ID MessageID
	// Value is the payload.
	Value T
	// Headers are the message's headers; nil means none. A backend carries
	// them from Publish to every Receive of the message unchanged:
	//
	//   - in memory, in the envelope itself: every recipient gets the map
	//     the publisher gave, which nobody changes after the publish;
	//   - on Kafka, as record headers: one header per entry, its key the
	//     entry's key and its value the entry's value as bytes (header
	//     order is unspecified). Headers the backend writes itself, from
	//     its options or for its own bookkeeping, are written too; on a key
	//     both use, the envelope's value is the one a consumer reads last;
	//   - on Pulsar, as message properties: one property per entry, merged
	//     with the properties the backend writes itself, the envelope's
	//     value winning on a key both use.
	//
	// On receive, a backend on a broker sets Headers to the message's
	// headers or properties as a map of strings (for a key a Kafka record
	// repeats, the last value), or nil when the message has none; it may
	// leave out the keys it writes for its own bookkeeping. A lag notice
	// has none.
	Headers Headers
	// Ticket tracks the outcome of a tracked publish; nil when untracked.
	Ticket *Ticket
	// Lagged > 0 marks a lag notice: the subscriber missed that many
	// messages. Value and Ticket are then zero.
	Lagged uint64
	// Redeliveries is, on receive, how many times the message had been
	// delivered to the subscription before without being acked, as far as
	// the backend knows, so that a subscriber can give up on a message
	// that keeps failing. A backend that never delivers a message twice
	// (in memory) leaves it 0. On Kafka it is what the member counted: the
	// nacks of the message since its partition came to the member (the
	// log keeps no count, so it starts again at 0 when the partition moves
	// to another member); on Pulsar it is the broker's redelivery count of
	// the message on the subscription (which starts again when the
	// subscription's last consumer leaves).
	Redeliveries uint32
}
