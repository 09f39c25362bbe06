// Package pulsartopology is the Apache Pulsar backend of package topology,
// on github.com/apache/pulsar-client-go: a topology's main topic, hold
// queues and dead-letter queue are Pulsar topics with the names the
// builder derives (persistent://<tenant>/<namespace>/<name>, each '/'
// written '~' as package topic/pulsartopic writes it), and its consumer
// group is a durable subscription named after the group.
//
// # Mapping
//
//   - Declare creates each topic's producer (which creates a missing
//     non-partitioned topic), the group's subscription on the main topic at
//     its latest message and on every hold topic, and the DLQ's
//     subscription "dead". A subscription that exists keeps its position,
//     so Declare is idempotent, and a group receives everything published
//     after Declare returns however late its first reader subscribes. The
//     subscriptions are Shared, or Key_Shared on a sequenced topology (the
//     sequence key is the message key, so one key's messages go to one
//     consumer).
//   - Expiry. The broker keeps a message a subscription has not
//     acknowledged unless a policy evicts it: a message TTL acknowledges
//     the messages older than it on every subscription, delayed ones
//     included, and a backlog quota with consumer_backlog_eviction drops
//     the oldest. A held letter is therefore lost when its hold is not
//     shorter than its hold topic's TTL. With Options.Admin, Declare reads
//     the TTL in effect on each hold topic and the DLQ and refuses such a
//     hold (TTLError, wrapping ErrHoldOutlastsTTL), logs a WARN for a DLQ
//     with a TTL, and logs one WARN in the backend's life when a TTL cannot
//     be read. When Options.Admin is an EvictionAdmin, Declare reads the
//     backlog quotas and subscription expiration in effect on them too:
//     it refuses (EvictionError, wrapping ErrEvictionPolicy) a backlog
//     quota with policy consumer_backlog_eviction, unless
//     Options.AcceptBacklogEviction (a message_age one on a hold topic
//     whose delay is at least 90% of its limit, accepted or not: it drops
//     held letters before they fall due), and a subscription expiration on
//     the DLQ, whose subscription has no consumer between replays; it logs a
//     WARN for hold topics whose subscriptions expire. The admin calls get
//     Declare's context, which Close ends too. What an operator sets on
//     the namespace (TTL, backlog quota, subscription expiry, inactive
//     topic deletion) is listed in docs/topology.md.
//   - A letter travels as a message: the value encoded by Options.Codec,
//     the sequence key as the message key, its history in properties
//     (topology-shard, topology-retries, topology-first-failure,
//     topology-last-failure, topology-resume; the topology-death-*
//     properties on a dead letter, whose failure text is cut to
//     topology.MaxDeathErrorBytes). Times are RFC 3339 with nanoseconds, in UTC.
//     The letter's own Headers are properties beside them.
//     A message another producer wrote whose history property holds a
//     value no letter carries does not decode: a count that is not a
//     decimal within its bound, a time that is not RFC 3339 or falls
//     outside the years 0 to 9999 in UTC, a topology-resume other than
//     "true" or "false", and a topology-death-* property with such a value
//     even without
//     topology-death-reason. Any other value is read as written: a time
//     in any offset, a death reason this version does not know, text
//     that is not UTF-8; a failure text longer than
//     topology.MaxDeathErrorBytes is cut, and of a repeated key the last
//     counts. kafkatopology reads record headers the same way.
//   - Publish sends the letter to the main topic, unless its message would
//     outgrow Options.MaxMessageSize (the brokers' maxMessageSize) once a
//     hold or a dead-lettering adds its metadata: the history and a
//     Death at their largest, topology-group, a hold's delivery time, and
//     the fields the client writes. Such a letter could be delivered but
//     neither held nor dead-lettered; Publish refuses it, sending nothing,
//     with a LetterTooLargeError wrapping ErrLetterTooLarge and
//     pulsar.ErrMessageTooLarge.
//   - Hold sends the letter to the hold topic with delayed delivery
//     (DeliverAfter the hold's delay) and the property topology-group: the
//     broker keeps it from the group's Shared subscription until it is due.
//     Pulsar keeps the due time in milliseconds, so a hold may end up to
//     1ms before its delay has passed from the moment it was sent.
//     A reader consumes the main topic and the group's hold topics under
//     one subscription name, so a released retry reaches the group that
//     held it and no other. A crash while a letter is held loses nothing:
//     it is on the broker, and the held message is acknowledged on the
//     main topic only after the broker stored it in the hold topic. The
//     backend does not count the letters waiting in a hold topic: they
//     are the msgBacklog of the group's subscription in the hold topic's
//     stats (pulsar-admin topics stats, or the admin REST API).
//   - Requeue (a retry without hold queues, a replayed dead letter, an
//     interrupted message) sends the letter to the main topic with
//     topology-group set: the other groups' readers acknowledge it without
//     delivering it.
//   - Return (the messages a stopping sequenced source held back, and those
//     of its keys whose handling the stop interrupted) leaves the messages
//     unacknowledged: the broker delivers them to the group again once
//     their reader's consumer has closed, before the later messages of
//     their keys.
//   - DeadLetter sends the letter to the DLQ; dead sources and Replay read
//     the DLQ's Shared subscription "dead".
//   - Settle acknowledges the message on its subscription, unless the
//     letter's hand-off (Hold, Requeue, DeadLetter) failed: it is then
//     negatively acknowledged (ErrNotSettled) and delivered to the group
//     again after Options.RedeliveryDelay, unless a later hand-off of it
//     succeeded (a topology Source keeps such a letter, unsettled, and
//     hands it off again until the backend takes it). Closing a
//     reader, or a crash, leaves what it received unacknowledged, and the
//     broker delivers it to the subscription again.
//   - A broadcast topology's reader has a non-durable subscription of
//     its own, starting at the latest message, with one Failover
//     consumer (dispatched to as an Exclusive one). After a lost
//     connection or an unload it subscribes again at the latest message,
//     missing what was published meanwhile; each such resubscription is
//     logged at WARN.
//
// A dead-letter reader's TryReceive, which Replay uses to read everything
// the DLQ holds, publishes a marker message (property topology-marker) to
// the DLQ and receives until the marker comes back; readers never deliver
// markers. Its context and Options.OperationTimeout bound the marker's
// send and the wait for it to come back, whichever ends first. Closing
// the reader ends it, its marker's send included: it then returns
// ErrClosed. A dead-letter reader's PinEnd (topology.EndPinner, which
// Replay uses) publishes such a marker once: the reader delivers nothing
// that comes after it, and its TryReceive returns 0 once it is back.
//
// pulsar-client-go's own ConsumerOptions.DLQ policy and its retry-letter
// topic work per subscription inside the client and know nothing of
// holds, death metadata or sequencing: do not set them on a topology's
// subscriptions. See docs/topology.md for which to use when.
//
// # Bounded calls
//
// Declare and Subscribe (and SubscribeDead) are bounded by their context
// and by Options.OperationTimeout, whichever ends first.
// pulsar-client-go's CreateProducer and Subscribe, and the topic lookups
// they start with, take no context: each waits for the broker's answer up
// to the client's operation timeout (ClientOptions.OperationTimeout), and
// the client has no way to cut its connection. So each such call runs on
// a goroutine of the backend, and its caller waits for it within the
// context. When the context ends first, the caller gets an error wrapping
// ErrDeclare (Declare) or ErrSubscribe (Subscribe) and the context's
// error, and the call goes on until the client returns, then releases what
// it made: a reader's consumer is closed, and the Declare makes nothing
// more. What a Declare cut short had already made (topics, subscriptions)
// stays, and declaring again finishes the work.
//
// pulsar-client-go (up to v0.21.0 at least) can also never return from
// Subscribe on a partitioned topic: when the connection drops after one
// partition subscribed and before another did, the subscribed partition's
// consumer starts reconnecting before its dispatcher runs and waits for it
// for ever, and the call waits for that consumer to close. So a client
// call (a Declare's, a Subscribe's, a producer's creation) still running
// once Options.OperationTimeout has passed since it began is abandoned:
// its caller, if still waiting, gets an error wrapping ErrDeclare,
// ErrSubscribe or ErrSend, ErrAbandoned and context.DeadlineExceeded, one
// ERROR line names the call and the timeout, the backend's Close no
// longer waits for it, and what it makes if it ever returns is closed (an
// abandoned producer's creation is started again by the next call that
// needs the producer). A call that never returns keeps the client's
// goroutines of that consumer or producer until the process ends.
//
// A send (Publish, Hold, Requeue, DeadLetter) waits for the broker's
// receipt, and first, on a topic the backend has no producer for yet, for
// the producer's creation, until its context's deadline or
// Options.OperationTimeout, whichever is first; it then returns an error
// wrapping ErrSend and context.DeadlineExceeded. Cancelling its context
// does not cut a send short: a source carries out outcomes with its
// pipeline's acknowledgement context, which the pipeline cancels when it
// cuts a drain short, and an interrupted message must still be put back.
// A send cut short by its deadline may still reach the broker (delivery
// is at least once); a hand-off that fails leaves its letter's message to
// be delivered again (see Settle under Mapping).
//
// A producer's creation runs on a goroutine of the backend, without
// holding its lock, and the calls that need the same topic's producer
// meanwhile (sends, Declares) share it. It goes on when they stop
// waiting: the backend then keeps the producer for its next sends, or
// closes it when the backend has closed meanwhile. The Backend's Close
// waits for these calls and creations, each until it is abandoned at the
// latest; what one makes once the backend is closed, it closes.
//
// # Closing
//
// pulsar-client-go's Close calls take no context; each waits for the
// broker's answer to its close request for at most the client's operation
// timeout (ClientOptions.OperationTimeout). A reader's Close and the
// Backend's Close run them in the background and return by their
// context's deadline, with an error wrapping ctx.Err() when it ends first;
// the closing then goes on within that bound, and a later Close waits for
// it.
package pulsartopology
