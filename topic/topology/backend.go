package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/boulevard-go/boulevard/topic"
)

// ErrClosed is returned by the operations of a backend, or of queues it
// declared, after it was closed.
var ErrClosed = errors.New("topology: closed")

// ErrNilContext is returned for a nil context by a backend's Declare and
// Close, by the calls of the queues it declared that take one (Publish,
// Subscribe, Hold, Requeue, DeadLetter, SubscribeDead; not Return), by
// its readers' Receive, TryReceive and Close (not Settle), by
// [Publisher.Publish], [Replay], [Source.Run] and [Source.Close]: nothing
// is declared, published, held, requeued, dead-lettered, subscribed,
// received or closed then. [Memory] and the Kafka and Pulsar backends all
// do so.
var ErrNilContext = errors.New("topology: nil context")

// ErrEmptyDst is returned by a [Reader]'s Receive and TryReceive given a
// dst of length 0 (nil or not): they have nowhere to put a letter, so they
// consume none and return 0 with this error at once, whether or not the
// reader is closed.
var ErrEmptyDst = errors.New("topology: receive into a dst of length 0")

// Letter is one message as the queues of a topology carry it: the payload
// and what the topology knows about its history.
type Letter[T any] struct {
	// Value is the payload.
	Value T
	// Key is the sequence key of a sequenced topology. On a broker
	// backend it is the record's (Kafka) or message's (Pulsar) key on any
	// topology, so a letter that something outside the topology produced
	// with a key carries it; "" when there is none. The in-memory backend
	// keeps what was published: "" unless sequenced.
	Key string
	// Shard is the routing shard the key hashes to (0 when not sequenced).
	Shard int
	// Retries is how many times the message was retried, never negative:
	// a [Source] counts a negative count a backend reports as 0, and logs
	// the first one it meets (WARN).
	Retries int
	// FirstFailure and LastFailure are when it first and last failed; zero
	// while it never failed. A backend brings a letter back from a hold
	// queue or a requeue with Retries, FirstFailure and LastFailure as it
	// was given them, the times to the nanosecond: a sequenced source
	// knows its key's message coming back by them, and a letter it does
	// not know waits for its key's turn.
	FirstFailure, LastFailure time.Time
	// Death is set on a dead letter: why and where it died.
	Death *Death
	// Headers are the letter's own headers, W3C trace context
	// (traceparent, tracestate) or anything else its publisher attached
	// (see PublisherOptions.Headers); nil when it has none, which costs
	// nothing. Every backend carries them unchanged through Publish,
	// Hold, Requeue, Return and DeadLetter, and Replay puts them back on
	// the main topic with the letter: the Kafka backend as record
	// headers, the Pulsar backend as message properties, both beside the
	// ones they write themselves, the in-memory backend in the letter. A
	// record or message produced into a topology's topic by something
	// else delivers its headers or properties here too.
	//
	// Names starting with ReservedHeaderPrefix ("topology-") are the
	// backends' own: a backend drops them from the headers it is given
	// and leaves them out of the headers it delivers, so they can
	// neither be read here nor change a letter's history. A publish whose
	// headers take more than MaxHeaderBytes is refused (ErrHeadersTooLarge).
	// Once given to a backend, headers are shared with every reader of
	// the letter and must not be changed.
	Headers topic.Headers
	// Receipt is the backend's handle on this delivery (an offset, a broker
	// message id), given back to [Reader.Settle]; nil when the backend
	// needs none. It is never encoded: a backend that carries letters as
	// JSON (topic.JSONCodec) leaves it out.
	Receipt any `json:"-"`
	// Resume is set by a sequenced topology's source on a letter it sends
	// through a hold queue or puts back: the letter still holds its key,
	// so when it comes back it goes ahead of the later messages of that
	// key the source holds back. A backend carries it with the letter
	// (in a header, say) through Hold and Requeue, and gives it back as
	// received through Return; Publish and DeadLetter clear it.
	Resume bool
}

// ReservedHeaderPrefix starts the names of the headers (Kafka) and
// properties (Pulsar) the backends write a letter's history under: a
// Letter's Headers never carry such a name (see Letter.Headers).
const ReservedHeaderPrefix = "topology-"

// ReservedHeader reports whether name starts with ReservedHeaderPrefix: a
// header a backend keeps for a letter's history, never one of its
// Headers.
func ReservedHeader(name string) bool { return strings.HasPrefix(name, ReservedHeaderPrefix) }

// MaxHeaderBytes bounds a letter's Headers: the sum of the lengths of
// their names and values. Publish refuses more (ErrHeadersTooLarge), so
// that headers cannot take a broker message's room from the history a
// hold and a dead-lettering add to a letter.
const MaxHeaderBytes = 16 << 10

// ErrHeadersTooLarge is wrapped by the error [Publisher.Publish] and a
// backend's Queues.Publish return for a letter whose Headers take more
// than MaxHeaderBytes; nothing is published then.
var ErrHeadersTooLarge = errors.New("topology: headers larger than MaxHeaderBytes")

// CheckHeaders returns nil when h takes at most MaxHeaderBytes (the
// names starting with ReservedHeaderPrefix, which a backend drops, not
// counted), and otherwise an error wrapping ErrHeadersTooLarge that says
// by how much. A backend's Queues.Publish calls it.
func CheckHeaders(h topic.Headers) error {
	n := 0
	for k, v := range h {
		if !ReservedHeader(k) {
			n += len(k) + len(v)
		}
	}
	if n > MaxHeaderBytes {
		return fmt.Errorf("%w: %d bytes of names and values, at most %d", ErrHeadersTooLarge, n, MaxHeaderBytes)
	}
	return nil
}

// CarriedHeaders returns what a backend carries of h: h itself when it
// has no name starting with ReservedHeaderPrefix (so that carrying
// headers allocates nothing), nil when it has nothing else, and
// otherwise a copy of h without those names.
func CarriedHeaders(h topic.Headers) topic.Headers {
	reserved := 0
	for k := range h {
		if ReservedHeader(k) {
			reserved++
		}
	}
	switch {
	case len(h) == reserved:
		return nil
	case reserved == 0:
		return h
	}
	out := make(topic.Headers, len(h)-reserved)
	for k, v := range h {
		if !ReservedHeader(k) {
			out[k] = v
		}
	}
	return out
}

// Death is the death metadata a dead letter carries.
type Death struct {
	// Reason is why it was dead-lettered.
	Reason Reason
	// Error is the text of the failure that killed it, at most
	// MaxDeathErrorBytes of it (see BoundDeathError).
	Error string
	// Topic is the main topic it was published to.
	Topic string
	// Group is the consumer group that dead-lettered it.
	Group string
	// Retries is how many times it had been retried.
	Retries int
	// FirstFailure and LastFailure are when it first and last failed.
	FirstFailure, LastFailure time.Time
}

// MaxDeathErrorBytes bounds the failure text a dead letter carries
// (Death.Error): a source keeps the first bytes of a longer one, and the
// broker backends write at most this many (see BoundDeathError). Without
// the bound a failure text longer than the broker's largest message
// (1 MB by default on Kafka, 5 MiB on Pulsar) would make a dead letter
// the broker refuses for ever: a Source would keep it, handing it off
// again until it closes, and it would never reach the DLQ.
const MaxDeathErrorBytes = 4096

// BoundDeathError returns text when it is at most MaxDeathErrorBytes long,
// and otherwise its first bytes, cut at a character boundary (text that
// is not UTF-8 is cut where the room ends), followed by " … (N bytes
// cut)", N the bytes left out: MaxDeathErrorBytes in all at most. A
// Backend applies it to the Death.Error it writes, so that a letter
// dead-lettered without a source (a replay tool calling DeadLetter) is
// bounded too; a text it bounded already, as a source's, it returns
// unchanged, so the count stays that of the original text.
func BoundDeathError(text string) string {
	if len(text) <= MaxDeathErrorBytes {
		return text
	}
	// Room for the note first: it names at most len(text) bytes cut.
	room := MaxDeathErrorBytes - len(deathNoteOpen) - len(strconv.Itoa(len(text))) - len(deathNoteClose)
	// A character is at most utf8.UTFMax bytes: the start of the one the
	// room ends in (or right after it) is that close. Without one there,
	// the text is not UTF-8 and is cut where the room ends.
	kept := room
	for i := room; i > room-utf8.UTFMax; i-- {
		if utf8.RuneStart(text[i]) {
			kept = i
			break
		}
	}
	return text[:kept] + deathNoteOpen + strconv.Itoa(len(text)-kept) + deathNoteClose
}

// The note BoundDeathError puts after a cut text, around the bytes cut.
const (
	deathNoteOpen  = " … ("
	deathNoteClose = " bytes cut)"
)

// Backend declares topologies on one kind of broker. [Memory] is the
// in-memory one.
type Backend[T any] interface {
	// Name is the backend's name ("in_memory").
	Name() string
	// Declare creates whatever t needs (the main topic, its consumer group,
	// the hold queues, the DLQ) that does not exist yet, and returns the
	// queues. It is idempotent: declaring the same topology again, on every
	// restart for instance, creates nothing new and returns queues over the
	// same state.
	Declare(ctx context.Context, t *Topology) (Queues[T], error)
	// Close closes every reader of the backend's queues and releases what
	// the backend holds. Declare returns ErrClosed from the call on, and
	// the operations of its queues once Close has returned nil. It
	// returns by ctx's deadline: nil once everything is closed, or an
	// error wrapping ctx.Err() when ctx ended first, the rest of the
	// closing then being cut short (a durable backend may leave settled
	// letters uncommitted, to be delivered again) and ending soon after.
	// Idempotent: a later call waits, within its own ctx, for the same
	// closing.
	Close(ctx context.Context) error
}

// Queues are the declared queues of one topology, as a backend provides
// them. All methods are safe for concurrent use and return ErrClosed once
// the backend is closed. Their ctx bounds only waiting: an operation that
// can complete at once must complete even when ctx is done, because a
// source carries out outcomes with its pipeline's acknowledgement context,
// which the pipeline cancels when it cuts a drain short, and a message
// interrupted then must still be put back.
//
// When Hold, Requeue or DeadLetter fails for a letter received from a
// reader, a durable backend keeps that letter's message from being settled
// (the broker delivers it again); a later hand-off of the same letter that
// succeeds undoes that, as a Source hands such a letter off again itself
// until the backend takes it (but one failing with ErrClosed, see Source). A backend that refuses a
// hand-off for room returns an error wrapping ErrFull and keeps nothing
// of the letter: a Source keeps it and hands it off again (see Source).
type Queues[T any] interface {
	// Topology is the topology they were declared for.
	Topology() *Topology
	// Publish appends l to the main topic: every consumer group of it
	// receives it (a broadcast topology's every consumer). It may wait for
	// room; ctx bounds the wait.
	Publish(ctx context.Context, l Letter[T]) error
	// Subscribe adds a consumer of the topology's consumer group (of its own
	// ephemeral subscription, for a broadcast topology). It receives the
	// main topic's messages and the messages this group's hold queues
	// release.
	Subscribe(ctx context.Context) (Reader[T], error)
	// Hold parks l in hold queue i (an index into Topology().Holds()) until
	// its delay has passed, then delivers it to this consumer group again,
	// and to no other group.
	Hold(ctx context.Context, i int, l Letter[T]) error
	// Requeue delivers l to this consumer group again at once, after what
	// the group has queued.
	Requeue(ctx context.Context, l Letter[T]) error
	// Return gives back ls, letters received from readers of these queues
	// (the group's, or the DLQ's from SubscribeDead) and not settled,
	// which their consumer will not handle (a sequenced source that stops
	// returns the messages it held back; Replay the dead letters it can
	// neither replay nor put back on the DLQ), in the order they were
	// received: the queue they came from delivers them again, in that
	// order, before the letters that came after them. The in-memory backend
	// puts them back at the head of the queue they came from; a durable backend
	// leaves them unsettled, and the group receives them again from the
	// broker once their readers have closed (a crash in between loses
	// nothing). The letters come back as they were received; the caller
	// settles none of them afterwards.
	Return(ctx context.Context, ls []Letter[T]) error
	// DeadLetter appends l, whose Death is set, to the DLQ. It returns
	// ErrNoDLQ when the topology has none.
	DeadLetter(ctx context.Context, l Letter[T]) error
	// SubscribeDead adds a consumer of the DLQ; ErrNoDLQ when there is
	// none. Consumers of one DLQ share its messages.
	SubscribeDead(ctx context.Context) (Reader[T], error)
}

// ErrNoDLQ is returned by DeadLetter and SubscribeDead on a topology without
// a dead-letter queue.
var ErrNoDLQ = errors.New("topology: no dead-letter queue")

// Reader receives letters from a queue.
//
// Receive and TryReceive check dst before anything else, the context and
// whether the reader is closed included: given a dst of length 0 (nil or
// not) they return 0, ErrEmptyDst at once and consume nothing, on an open
// reader as on a closed one.
//
// Once the reader's Close was called, Receive and TryReceive (given room)
// both return 0, ErrClosed, whatever their context and whatever letters
// are ready: a closed reader hands out nothing more, and the letters it
// had not handed out stay with its group (its other readers, or its next
// one, receive them). Once only the backend was closed, a reader may
// first hand out the letters it already holds (the in-memory backend's
// do, see [Memory.Close]), then returns ErrClosed.
//
// A durable backend's reader skips for good, logging them at WARN (a
// burst on one partition in a few lines), the messages it cannot decode
// into letters, and counts each: it
// implements [UndecodableCounter], which a [Source] reads into
// Stats.Undecodable. The in-memory backend, which keeps values, skips
// none.
type Reader[T any] interface {
	// Receive waits for at least one letter and fills dst[:n] with up to
	// len(dst) of them, in order. It returns ctx.Err() when ctx is done
	// first (nothing consumed), ErrClosed when the reader or its backend was
	// closed, and ErrEmptyDst, at once, when len(dst) == 0.
	Receive(ctx context.Context, dst []Letter[T]) (int, error)
	// TryReceive is Receive without waiting for letters: it fills dst[:n]
	// with what is ready now, in order, and returns 0, nil when nothing is.
	// It never waits for a letter to arrive; it may wait for the backend's
	// own bookkeeping, to know what is ready (a durable backend's reader
	// catching up with its log, a dead-letter reader's marker coming back),
	// bounded by the backend's own timeouts and by ctx: when ctx ends first
	// it returns by ctx's deadline with an error wrapping ctx.Err(), having
	// consumed nothing. A backend with nothing to wait for (the in-memory
	// one) returns what is ready whatever ctx. It returns ErrClosed when
	// the reader or its backend was closed, and ErrEmptyDst, at once, when
	// len(dst) == 0.
	TryReceive(ctx context.Context, dst []Letter[T]) (int, error)
	// Settle records that l's fate is sealed: handled, held, requeued or
	// dead-lettered elsewhere. A durable backend commits it then and not
	// before, so that a crash in between delivers it again.
	Settle(ctx context.Context, l *Letter[T]) error
	// Close ends the reader: a waiting Receive returns ErrClosed at once,
	// and a durable backend commits what was settled and lets the rest
	// be delivered again to the group. It returns by ctx's deadline: nil
	// once the reader is closed, or an error wrapping ctx.Err() when ctx
	// ended first, the rest of the closing then being cut short (what was
	// settled may stay uncommitted, to be delivered again) and ending soon
	// after; the backend's Close waits for it. A reader with nothing to
	// commit (a broadcast reader) may be closed with a context already
	// done. Idempotent: a later call waits, within its own ctx, for the
	// same closing.
	Close(ctx context.Context) error
}

// EndPinner is implemented by a [Reader] that can stop at the end its
// queue has now: the dead-letter readers of the in-memory, Kafka and
// Pulsar backends do. [Replay] pins its DLQ reader's end before it reads,
// and then handles the DLQ a chunk at a time instead of reading all of it
// first: a letter it replays that fails again and comes back to the DLQ
// is past the end, and is not read again.
type EndPinner interface {
	// PinEnd pins the reader's end to what its queue holds now: from then
	// on the reader delivers only letters the queue held at the call, and
	// TryReceive returns 0, nil once it has delivered every one of them
	// (Receive then waits, until ctx ends or the reader closes). A letter
	// that reaches the queue after the call is never delivered by this
	// reader, and stays for the queue's next reader. The in-memory
	// backend counts the letters its DLQ holds; the Kafka backend asks the
	// log end (high-water mark) of each partition of the topic; the Pulsar
	// backend publishes a marker to the topic and stops where it comes
	// back. Call it before the first Receive or TryReceive, from the
	// goroutine that receives. It returns by ctx's deadline, with an
	// error wrapping ctx.Err() when ctx ended first (the reader is then
	// not pinned), and ErrClosed once the reader or its backend was
	// closed. A later call returns nil and leaves the end where the first
	// one put it. A nil ctx returns ErrNilContext, the reader not pinned.
	PinEnd(ctx context.Context) error
}

// UndecodableCounter is implemented by a [Reader] that may skip messages
// it cannot decode: the Kafka and Pulsar backends' readers do. A [Source]
// adds up its readers' counts (Stats.Undecodable), and [Replay] reports
// its DLQ reader's (ReplayReport.Undecodable).
type UndecodableCounter interface {
	// Undecodable returns the number of letters this reader skipped for
	// good because they could not be decoded (an error, a panic or a
	// Goexit of the codec, or history headers or properties that do not
	// parse): a durable backend commits or acknowledges past them, so they
	// are not delivered again. The count is exact; the log is not one line
	// each: per partition, the first is logged at WARN in full, and the
	// like ones within 10 s of the last line are only counted in the next
	// line of the partition (held_back, with the first and the last
	// position held back), or in one the reader logs as it closes or lets
	// go of the partition. Messages
	// meant for another consumer group are skipped too, and not counted.
	// The count only grows.
	Undecodable() uint64
}

// ResubscribeCounter is implemented by a broadcast [Reader] whose
// subscription does not survive the loss of its connection to the broker:
// the Pulsar backend's broadcast reader subscribes again, on its own, at
// the latest message, and may have missed the letters published while it
// was away (see docs/topic-backends.md, "A reconnection loses messages").
// A [Source] adds up its readers' counts (Stats.BroadcastResubscribes).
type ResubscribeCounter interface {
	// Resubscribes returns the number of times this reader's consumer
	// subscribed again after losing its connection, once per topic
	// partition. The count only grows.
	Resubscribes() uint64
}

// ReleaseNotifier is implemented by a [Reader] that may let go of part of
// what it reads while letters of it are handed out, and then waits, up to
// a bound of its own, for them to be settled: the Kafka backend's group
// reader, whose partition a rebalance revokes, waits up to its
// Options.RevokeTimeout; a letter settled later is delivered again to the
// partition's next owner. A [Source] sets it right after it subscribes,
// to the FlushInFlight of the feed its Run delivers through, so that its
// pipeline's batchers emit their open batches at once while the reader
// waits, and sets nil once that Run has returned.
type ReleaseNotifier interface {
	// OnRelease sets f, which the reader calls as it starts waiting for
	// the letters of a part it lets go (only while some are handed out
	// and the wait is not zero, never while the reader is closing), and
	// whose done (nil: none) it calls once the wait is over and what was
	// settled is committed. f must not block, nor call back into the
	// reader. A later call replaces f; nil: the reader just waits.
	OnRelease(f func() (done func()))
}

// ShardChange is what a [ShardNotifier] reader tells of the routing
// shards it reads.
type ShardChange uint8

const (
	// ShardsReleased: the reader lets go of a part of what it reads (a
	// Kafka partition a rebalance revokes, or one lost with its session).
	ShardsReleased ShardChange = iota + 1
	// ShardsAssigned: the reader starts reading a new assignment (a
	// Kafka group session begins); what it does not hold it no longer
	// reads.
	ShardsAssigned
)

// String returns "released" or "assigned".
func (c ShardChange) String() string {
	switch c {
	case ShardsReleased:
		return "released"
	case ShardsAssigned:
		return "assigned"
	}
	return "ShardChange(" + strconv.Itoa(int(c)) + ")"
}

// ShardNotifier is implemented by a [Reader] whose share of a sequenced
// topic's routing shards ([Letter.Shard]) moves as its group rebalances,
// and that can tell when: the Kafka backend's group reader, whose
// partitions a rebalance revokes and assigns. A message that a sequenced
// [Source] sent to a hold queue comes back to whichever reader holds its
// shard then; told that its reader no longer holds the shard, the
// source stops holding the key's later letters back for it, and gives
// back (Queues.Return) the letters of the shard it took from the reader
// and had not yet admitted, until an assignment gives the shard back to
// the reader; from a reader that is also a [PartTracker], it gives back
// the letters of the part let go of instead, whatever their shard, and
// delivers the letters of a shard no longer held that parts the reader
// holds handed out. A sequenced Source sets it right after it
// subscribes and sets nil once the Run that subscribed the reader has
// returned. The Pulsar backend's Key_Shared consumers are moved keys
// without being told, and do not implement it (see docs/topology.md,
// "Sequenced topics").
type ShardNotifier interface {
	// OnShards sets f, which the reader calls from its own goroutines
	// (for two parts let go at once, from two at once): with
	// ShardsReleased as it lets go of a part, before it waits for the
	// part's letters handed out (see ReleaseNotifier), never while the
	// reader is closing; and with ShardsAssigned as it starts reading a
	// new assignment, before it hands out any letter of it (a reader
	// that learns of a part let go for good only once the part comes
	// back may tell the assignment it held without it then, ahead of
	// the one with it; one that lets go of a part and reads on from the
	// rest tells the assignment left after the part released). in
	// reports whether a shard is in the part let go, or in the
	// assignment, until f returns: f must not keep it. f
	// must not block; it may give letters back (Queues.Return), and
	// must not call into the reader otherwise. A later call replaces f;
	// nil: nobody is told.
	OnShards(f func(change ShardChange, in func(shard int) bool))
}

// PartTracker is implemented by a [ShardNotifier] that knows the part of
// what it reads each letter it hands out came from: the Kafka backend's
// group reader, whose letters each come from one partition's claim. A
// part may hold letters of a shard that the reader tells of with another
// part (a Kafka partition holds the letters of a shard that a grown
// partition count now routes to another partition), so the shards told
// do not say which letters the part let go of held. A sequenced [Source]
// whose reader implements it gives back (Queues.Return) exactly the
// letters it took from a part let go of, whatever their shard, as the
// reader tells so and as it admits them later, and keeps those of the
// parts the reader still holds: given back, they would stay unsettled
// until the reader let their part go too.
type PartTracker interface {
	// LetGo reports whether the part that handed out the letter whose
	// Receipt is receipt was let go of; the reader records it before it
	// tells the part released (ShardsReleased), and once true for a
	// receipt it stays true. False for a receipt it did not hand out.
	// Called with the source's locks held: it must not block, nor call
	// into the source.
	LetGo(receipt any) bool
}

// ReachReporter is implemented by a [Reader] that can tell whether it
// can read from its broker: the Kafka and Pulsar backends' readers do,
// the in-memory backend's, which has no broker to lose, do not. A
// [Source] sets it right after it subscribes, to the handle of the Run
// that receives through the reader (producer.Stage.Health), whose stage
// is then "degraded" while the reader cannot read, and sets nil before
// that Run returns: the reports of a failed run's reader, which stays
// open until its letters are settled, reach no later Run.
//
// A reader reports, to the observer set last, by the rule of its backend
// (kafkatopology: group sessions that keep failing, a client that
// reached no broker, or a partition fetch an ACL refuses; pulsartopology: a consumer whose reconnection
// attempts keep failing): Degrade once it cannot read, and again at later
// failures while that lasts, then Recovered once it reads again. Reports
// come one at a time, from the reader's goroutines, never from a call
// into the reader other than ReportReach; they must not block nor call
// back into the reader.
type ReachReporter interface {
	// ReportReach sets o, which hears from then on whether the reader can
	// read from its broker; when it cannot as o is set, ReportReach
	// calls o.Degrade at once, with the reason last reported. A later
	// call replaces o; nil: nobody hears. Once ReportReach has returned,
	// nothing more is reported to the observer it replaced.
	ReportReach(o topic.ReachObserver)
}

// undecodable returns what r counts as skipped for good because it could
// not be decoded (see UndecodableCounter); 0 for a reader that counts
// nothing.
func undecodable[T any](r Reader[T]) uint64 {
	if c, ok := r.(UndecodableCounter); ok {
		return c.Undecodable()
	}
	return 0
}

// readerCounts are what a reader counts of itself (UndecodableCounter,
// ResubscribeCounter).
type readerCounts struct{ undecodable, resubscribes uint64 }

// countsOf returns what r counted so far; 0 for what it does not count.
func countsOf[T any](r Reader[T]) readerCounts {
	c := readerCounts{undecodable: undecodable(r)}
	if rc, ok := r.(ResubscribeCounter); ok {
		c.resubscribes = rc.Resubscribes()
	}
	return c
}

// add adds o to c.
func (c *readerCounts) add(o readerCounts) {
	c.undecodable += o.undecodable
	c.resubscribes += o.resubscribes
}

// since returns what c counted beyond before.
func (c readerCounts) since(before readerCounts) readerCounts {
	return readerCounts{undecodable: c.undecodable - min(before.undecodable, c.undecodable),
		resubscribes: c.resubscribes - min(before.resubscribes, c.resubscribes)}
}
