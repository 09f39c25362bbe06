// Package kafkatopology is the Kafka backend of package topology, on
// sarama: a topology's main topic, hold queues and dead-letter queue are
// Kafka topics with the names the builder derives (each '/' turned into
// '.', as topic/kafkatopic names topics), and its consumer group is a
// Kafka consumer group.
//
// # Mapping
//
//   - Declare creates the main topic (a sequenced topology's with one
//     partition per routing shard), every hold topic and the DLQ when they
//     do not exist, and commits the log end as the starting offset of the
//     consumer group on every partition of the main topic that has none,
//     so a group reads everything published after Declare returns, however
//     late its first consumer joins, and nothing published before; with
//     Options.InitialOffset earliest it commits the log start instead, so
//     the records a topic already holds are delivered. When records
//     precede where it starts a group, or it starts one at the oldest
//     record, it logs one INFO line with how many. It is idempotent: a
//     group with committed offsets keeps them, whatever InitialOffset.
//   - Retention. A hold topic Declare creates keeps its records their
//     delay plus Options.HoldRetentionMargin (retention.ms; 7 days by
//     default, so a held letter outlives its due time by a week even when
//     no releaser runs), and a DLQ it creates keeps dead letters forever
//     (retention.ms -1) or Options.DLQRetention; both get cleanup.policy
//     delete and no size limit (retention.bytes -1), whatever the broker's
//     defaults. An existing hold topic or DLQ is used as it is, once
//     Declare has read its retention.ms, cleanup.policy and
//     retention.bytes (DescribeConfigs): it refuses, with a RetentionError
//     wrapping ErrRetentionTooShort and naming the topic and the setting,
//     a hold topic that keeps records less than its delay plus
//     MinHoldRetentionMargin (1h), a hold topic or DLQ that compacts, and
//     a hold topic or DLQ with a finite retention.bytes unless
//     Options.AcceptRetentionBytes (size retention deletes the oldest
//     records of a full partition, however young), since each can delete
//     a letter before it is released or replayed; it logs a WARN for an
//     existing DLQ with a finite retention below Options.DLQRetention
//     (forever by default).
//     When the cluster does not describe the topics (the client is not
//     authorized to), Declare logs one WARN and goes on unchecked. The
//     main topic gets the broker's defaults. In the same request Declare
//     reads the max.message.bytes of the main topic, the hold topics and
//     the DLQ, and logs a WARN for each below Producer.MaxMessageBytes,
//     naming the topic, its limit and the producer's: letters between the
//     two fail their publish or hand-off there. It goes on.
//   - A letter travels as a record: the value encoded by Options.Codec,
//     the sequence key as the record key, and its history in headers
//     (topology-shard, topology-retries, topology-first-failure,
//     topology-last-failure, topology-resume; on a hold record
//     topology-due, topology-topic and topology-group; on a dead letter the
//     topology-death-* headers). Times are RFC 3339 with nanoseconds, in UTC.
//     The letter's own Headers are record headers beside them.
//     A record another producer wrote whose history header holds a value
//     no letter carries does not decode: a count that is not a decimal
//     within its bound, a time that is not RFC 3339 or falls outside the
//     years 0 to 9999 in UTC, a topology-resume other than "1" or "0", and
//     a topology-death-* header with such a value even without
//     topology-death-reason. Any other value is read as written: a time
//     in any offset, a death reason this version does not know, text
//     that is not UTF-8; a failure text longer than
//     topology.MaxDeathErrorBytes is cut, and of a repeated key the last
//     counts. pulsartopology reads message properties the same way.
//   - Publish produces to the main topic and returns once the broker has
//     acknowledged the record (acks=all). A sequenced letter goes to the
//     partition of its shard (shard modulo the partition count, so a key
//     always lands on one partition and keeps its order); the others are
//     spread round-robin. It refuses, with a LetterTooLargeError wrapping
//     ErrLetterTooLarge and producing nothing, a letter whose record is
//     larger than sarama's Producer.MaxMessageBytes (1 MiB by default)
//     less a reserve for the headers a hold or a dead-lettering adds to it
//     (every history header at its largest, the hold's, a Death with its
//     failure text at topology.MaxDeathErrorBytes, and a record batch's
//     framing: about 5 kB, a little more for long topology and group
//     names): such a letter fits on the main topic but could be neither
//     held nor dead-lettered, so each of its failures would stop its
//     partition's commits, for good. A record another producer wrote to
//     the main topic is not checked. The producer batches the records sent
//     at the same time, and the broker refuses a whole batch over the
//     topic's max.message.bytes: a record of a batch so refused that fits
//     the topic alone is sent again in a request of its own, through a
//     single-record producer with a client of its own.
//   - Hold produces the letter to the hold topic with its due time. Each
//     backend runs one releaser per hold topic it declared, a member of the
//     Kafka consumer group "<hold topic>:release": it reads a partition in
//     order (every record of a hold topic waits the same delay, so the head
//     is the earliest due), pauses the partition (sarama's
//     ConsumerGroup.Pause) and sleeps on one timer until the head is due
//     (at the latest the hold's delay after it read the head: a due time
//     further ahead, from a producer's clock ahead of its own, is logged
//     and does not hold the partition longer), produces it back to the
//     main topic, and marks its offset for commit
//     only after the broker acknowledged that produce. A crash while a
//     letter is held therefore loses nothing: the record stays in the hold
//     topic, uncommitted, and the next releaser releases it (at least once:
//     a crash between the produce and the commit releases it twice).
//     A releaser that cannot go on (a partition whose batch cannot be
//     decoded, which it does not skip; a letter it cannot produce back;
//     consumer group sessions that fail) stalls there, retrying, logs
//     the stall when it begins and then at growing intervals, not per
//     retry, and Backend.Stats lists it until it ends (see Stall).
//     Backend.Stats lists each partition a releaser claims with the
//     letters waiting there (Stats.Holds).
//   - The main topic is read by every consumer group, and a released retry
//     must reach only the group that held it. A record produced back by a
//     release, a Requeue or a Replay carries the header topology-group; the
//     readers of other groups (and broadcast readers) skip it and commit
//     past it. This keeps the broker's topics exactly the builder's names
//     (no extra return topic per group to create, secure and clean up), and
//     keeps a retried record on its shard's partition of the main topic.
//     The cost is that every group fetches the retries of the others.
//   - Settle marks a record's offset; a partition's contiguous prefix of
//     settled offsets is committed (sarama's auto-commit), so a record is
//     committed only once it and every record before it on its partition
//     have their fate sealed. When the group moves a partition to another
//     member, the reader waits up to Options.RevokeTimeout for the letters
//     of it in flight to be settled and commits them before letting go;
//     meanwhile a topology Source reading it has its pipeline's batchers
//     emit their open batches at once (topology.ReleaseNotifier). The
//     reader tells a sequenced Source each partition it lets go and each
//     assignment it starts on (topology.ShardNotifier): the source gives
//     back at once the letters of the partition it holds back behind a
//     key's retry, and those it took as the partition went, and forgets
//     the retries of the keys an assignment leaves out, which come back
//     to the partition's new owner, and those keys' FailAll poisonings:
//     the new owner handles their later letters. A
//     letter whose hand-off failed (Hold, Requeue
//     or DeadLetter returned an error) is never committed: its partition's
//     commits stop there and the group delivers it again after the next
//     rebalance or restart. A later hand-off of it that succeeds undoes
//     that: a topology Source keeps such a letter, unsettled, and hands
//     it off again until the backend takes it, then settles it.
//   - Return (the letters a stopping sequenced source held back) leaves
//     the letters unsettled: their partition's commits stop at the first
//     of them, and the group delivers them again from there, in order,
//     once their reader has closed, with the letters after them that were
//     settled (at least once).
//   - SubscribeDead reads the DLQ in the consumer group "<dlq>:dead", from
//     the oldest record not yet committed. TryReceive, which Replay uses,
//     returns 0 only once the reader has fetched every record the log held
//     when it was called; it waits for that within its context and
//     Options.AdminTimeout. Its reader pins its end (topology.EndPinner,
//     which Replay uses): PinEnd takes each partition's high-water mark,
//     and from then on the reader delivers no record at or past it, and
//     TryReceive returns 0 once every partition was read up to it.
//   - A broadcast consumer reads every partition of the main topic without
//     a group, from the log end as of Subscribe.
//
// Every Queues operation waits for the broker's acknowledgement, bounded
// by sarama's Producer.Timeout and Producer.Retry, and not by its context:
// a source hands letters on with a context that is cancelled when a drain
// is cut short, and a hand-off abandoned half way would leave a letter
// neither delivered nor held. Before it produces, an operation needs the
// partitions of its topic: it reads them from the shared client's metadata
// when that has them, and otherwise asks the cluster, bounded by its
// context and Options.AdminTimeout (see Bounded calls). Nothing is
// produced until then, so a lookup given up abandons nothing: the
// operation returns an error wrapping ErrMetadata (and the context's
// error), and a hand-off that fails this way leaves its letter
// uncommitted until a later hand-off of it succeeds, as any failed
// hand-off does (a topology Source keeps the letter and tries again).
//
// # Bounded calls
//
// New's first contact with the cluster is bounded by
// Options.ConnectTimeout, and NewContext's also by its context's deadline:
// every bootstrap broker is dialled and asked for its API versions, and
// when none answers in time the error wraps ErrConnect (and the context's
// error), naming every broker with its cause. NewContext's context also
// bounds the clients' first requests after that contact: when it ends
// while they wait, their connections are cut.
//
// Declare and Subscribe (and SubscribeDead) are bounded by their context
// and by Options.AdminTimeout, whichever ends first. sarama's requests take
// no context: a new client's first metadata request, an admin request or a
// commit waits for the broker's answer up to Net.ReadTimeout (30s by
// default), with retries. So each such call runs on a goroutine of the
// backend, with clients of its own (a declaration's client, made for it
// and closed when it is done; a reader's or a releaser's) dialing through
// connection sets of their own within the backend's (internal/kafkaconn),
// and its caller waits for it within the context. When the context ends
// first, the call returns an error wrapping ErrAdmin (Declare) or
// ErrConnect (Subscribe) and the context's error, and cuts those
// connections: what the call still waited for fails at once, it releases
// what it had made (a reader, a releaser not yet started) and ends soon
// after; the backend's Close waits for it. What a Declare cut short had
// already created (topics, starting offsets) stays, and declaring again
// finishes the work. A call that finished just as its context ended
// returns what it made.
//
// The offsets a reader asks through the backend's shared client (the log
// ends a TryReceive catches up with, where a claimed partition without a
// committed offset starts), and the partitions of a topic a produce asks
// for when that client's metadata lacks them, run on a goroutine of the
// backend the same way, bounded by Options.AdminTimeout (and, for a claim
// or a release, by its session; for a TryReceive or a Queues operation, by
// its context too): the caller returns by then (TryReceive with ErrCatchUp
// wrapping context.DeadlineExceeded, a produce with ErrMetadata wrapping
// it). That client's connections are shared with the producer and are not
// cut then: the request goes on within sarama's timeouts, or until the
// backend's Close cuts them, and Close waits for it.
//
// Closing is bounded by its context too. A reader's Close commits what
// was settled and leaves the group, and the Backend's Close does that for
// every reader, stops the releasers and closes the producer; sarama waits
// up to Net.ReadTimeout for each of those requests. Every client of the
// backend dials through a connection set (internal/kafkaconn): when
// Close's context ends first, Close returns an error wrapping ctx.Err()
// and cuts the connections (a reader's own, or all of the backend's), so
// that the requests still waiting fail at once and the closing ends soon
// after. What was settled and not yet committed is then delivered again.
// A group reader cuts its own connections Options.AdminTimeout after its
// Close's context ended, not at once: its closing goes on in the
// background meanwhile and commits what was settled, letters requeued,
// held or dead-lettered included, whose copies the group would otherwise
// receive besides the originals. A pipeline whose drain the shutdown
// timeout cuts short closes its source, and so its readers, with a
// context already cancelled; the backend's Close waits for those
// closings, and cuts them at its own deadline.
// From the backend's Close on, whether its closing completes or is cut
// short, Publish, Hold, Requeue and DeadLetter return an error wrapping
// topology.ErrClosed at once, and a produce under way that fails
// meanwhile (its connections cut) returns one too.
package kafkatopology
