package topology

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// DefaultMaxRetries is the default SourceOptions.MaxRetries.
const DefaultMaxRetries = 10

// DefaultMaxBatch is the default SourceOptions.MaxBatch.
const DefaultMaxBatch = 64

// DefaultMaxHeldBack is the default SourceOptions.MaxHeldBack.
const DefaultMaxHeldBack = 4096

// Upper bounds of SourceOptions, checked by Validate. The struct tags
// repeat them.
const (
	// MaxRetriesLimit is the largest SourceOptions.MaxRetries.
	MaxRetriesLimit = 1_000_000
	// MaxBatchLimit is the largest SourceOptions.MaxBatch, as large as a
	// producer stage's permit window can be.
	MaxBatchLimit = 1 << 16
	// MaxHeldBackLimit is the largest SourceOptions.MaxHeldBack.
	MaxHeldBackLimit = 1 << 20
)

// SourceOptions configure a [Source].
type SourceOptions[T any] struct {
	// Queues are the declared queues to consume (from Backend.Declare).
	// Required, with a Topology.
	Queues Queues[T] `name:"-" validate:"-"`
	// MaxRetries is how many times a message may be retried; a Retry past
	// it dead-letters the message with reason max_retries (timeout when
	// its last attempt timed out). 0 means DefaultMaxRetries (10); -1 means
	// none: a Retry is dead-lettered at once. At most MaxRetriesLimit.
	MaxRetries int `validate:"gte=-1,lte=1000000"`
	// MaxBatch is the most letters taken from the queues at once (never
	// more than the feed has permits for, and the buffers a producer stage
	// receives into are no larger than its permit window), 1 to
	// MaxBatchLimit. Default DefaultMaxBatch.
	MaxBatch int `validate:"gte=1,lte=65536"`
	// MaxHeldBack bounds the messages a sequenced source holds back
	// (Stats.HeldBack counts them): the later messages of a key, waiting
	// while an earlier one of the key is in flight or out in a hold queue
	// for its retry. At the bound the source takes no new letter from its
	// queues until one it holds back goes (backpressure: the letters wait
	// in the backend, none is dropped), with one exception: when every
	// message it holds back waits on a message out in a hold queue (or
	// requeued), which comes back through those same queues behind the
	// letters not yet taken, it takes letters one at a time past the
	// bound, logging a warning once, until one of them comes back; it
	// would otherwise wait for ever. It bounds too, on any source, the
	// letters whose hand-off the backend failed that the source keeps and
	// hands off again itself (Stats.HandOffKept, see Source): at the bound
	// it takes no new letter until the backend takes one of them
	// (backpressure: nothing is lost, nothing is read past the bound but
	// the letters in flight when it was reached). 1 to MaxHeldBackLimit;
	// default DefaultMaxHeldBack. A source of a topology that is not
	// sequenced holds nothing back.
	MaxHeldBack int `validate:"gte=1,lte=1048576"`
	// Logger receives one line per discarded message and per queue error.
	// Nil means slog.Default().
	Logger *slog.Logger `name:"-"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o SourceOptions[T]) WithDefaults() SourceOptions[T] {
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxHeldBack == 0 {
		o.MaxHeldBack = DefaultMaxHeldBack
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate checks o (after WithDefaults) and returns nil or a
// validate.Errors naming every broken rule ("topology.queues is
// required", or "topology.queues has no topology" when its Topology
// returns nil).
func (o SourceOptions[T]) Validate() error {
	return validate.Join(validate.Struct("topology", &o), checkQueues("topology.queues", o.Queues))
}

// checkQueues returns nil, or the validate.FieldError of field when q is
// nil or has no topology (its Topology returns nil, which a Queues that a
// backend's Declare made never does).
func checkQueues[T any](field string, q Queues[T]) error {
	if q == nil {
		return validate.Field(field, "required", "is required")
	}
	if q.Topology() == nil {
		return validate.Field(field, "topology", "has no topology (its Topology returned nil)")
	}
	return nil
}

// Delivery is the Metadata of every message a [Source] delivers (a
// *Delivery): where it comes from and its history. Read it, do not change
// it; it is valid until the message's outcome is reported.
type Delivery struct {
	// Topic is the main topic.
	Topic string
	// Group is the consumer group ("" for broadcast).
	Group string
	// Key and Shard are the sequence key and its routing shard.
	Key   string
	Shard int
	// Retries is how many times the message was retried before this
	// delivery.
	Retries int
	// FirstFailure and LastFailure are when it first and last failed.
	FirstFailure, LastFailure time.Time
	// Death is the death metadata of a dead letter (a source made by
	// NewDeadSource); nil otherwise.
	Death *Death
	// Headers are the letter's headers (Letter.Headers): those its
	// publisher gave it (PublisherOptions.Headers), such as the trace
	// context observe/tracing reads, or those of a record or message
	// another producer wrote; nil when it has none. A retry and a dead
	// letter carry the headers the message was published with.
	Headers topic.Headers
}

// LogValue describes the letter for logs: its main topic, its key when it
// has one, and its retries when it was retried. The pipeline's failure
// lines carry it (message.Message.LogValue).
func (d *Delivery) LogValue() slog.Value {
	if d == nil {
		return slog.Value{}
	}
	attrs := make([]slog.Attr, 0, 3)
	attrs = append(attrs, slog.String("topology", d.Topic))
	if d.Key != "" {
		attrs = append(attrs, slog.String("key", d.Key))
	}
	if d.Retries > 0 {
		attrs = append(attrs, slog.Int("retries", d.Retries))
	}
	return slog.GroupValue(attrs...)
}

// DeliveryOf returns the Delivery of a message a Source delivered, and
// whether it has one (nil and false for a nil m).
func DeliveryOf[T any](m *message.Message[T]) (*Delivery, bool) {
	return message.MetadataAs[*Delivery](m)
}

// Stats are a Source's counters.
type Stats struct {
	// Received is the number of letters taken from the queues, each
	// delivery of a requeued or retried letter included (a sequenced
	// source's letter requeued in its key's turn counts as received again
	// as the source puts it back to deliver it again). A reading
	// never shows more letters with an outcome (Acked, Retried, Deferred,
	// Requeued, DeadLettered, Discarded) than it, and none of these
	// counters goes down.
	Received uint64
	// Acked, Retried, Deferred and Requeued count outcomes: each letter
	// received gets one. Retried counts the retries sent back through a
	// hold queue (requeued at once without one; a retry past MaxRetries
	// is dead-lettered instead), Deferred and
	// Requeued the letters deferred and requeued, as the source decides
	// so, even when the backend then fails the hand-off (counted in
	// HandOffFailed too: the source keeps the letter and hands it off
	// again). On a
	// broadcast topology, which cannot deliver a letter again, a retried,
	// deferred or requeued letter is discarded and counts in Discarded
	// only.
	Acked, Retried, Deferred, Requeued uint64
	// DeadLettered counts letters the DLQ took (by a dead source: put
	// back), as it takes them: a letter whose dead-lettering the backend
	// failed, kept by the source (counted in HandOffKept meanwhile),
	// counts here once the DLQ takes it. Discarded counts those dropped
	// with a warning (no DLQ, or a broadcast retry, defer or requeue). So
	// once the source is idle, Received = Acked + Retried + Deferred +
	// Requeued + DeadLettered + Discarded; a letter kept to be handed
	// off as a dead letter (counted in Refused or HandOffKept), and a
	// sequenced source's letter held back behind its key (HeldBack), have
	// no outcome yet, nor do those Close gives back to the backend, nor a
	// letter whose dead-lettering failed with ErrClosed (the backend
	// closing) or once the source had closed (counted in
	// DeadLetterFailed).
	DeadLettered, Discarded uint64
	// DeadLetterFailed counts the letters whose dead-lettering (by a dead
	// source: putting back on the DLQ) the backend failed at least once
	// with an error other than ErrFull, each delivery of a letter at most
	// once: each counts in HandOffFailed too. It is not an outcome: the
	// source keeps such a letter and hands it off again until the DLQ
	// takes it (it counts in DeadLettered then) or the source closes (it
	// is given back); only one failed with ErrClosed, or once the source
	// had closed, is settled as it is.
	// A dead-lettering a full queue refused is kept too (see Refused) and
	// counts here never.
	DeadLetterFailed uint64
	// DeadLetteredBy splits DeadLettered by each dead letter's reason
	// (Death.Reason); its fields add up to DeadLettered.
	DeadLetteredBy DeadReasons
	// Poisoned counts the letters the source dead-lettered because their
	// key was poisoned, counted as it hands each off: those the DLQ took
	// count in DeadLettered too (DeadLetteredBy.Poisoned), but one with
	// no DLQ to go to is discarded (counted in Discarded), and one the
	// DLQ refused for room or failed counts in DeadLettered only once it
	// is handed off again (not at all if the source closes first and
	// gives it back).
	// So Poisoned can be more than DeadLetteredBy.Poisoned.
	Poisoned uint64
	// Subscriptions is the number of readers the source holds open: one
	// per running producer stage that reads (a broadcast or sequenced
	// source reads with one), and the readers of failed runs whose
	// letters are not all settled yet. A broadcast source closes its
	// reader when its run ends; a reader whose run failed is closed once
	// the letters it handed out are all settled or given back (see
	// Source.Run); the others close when the source closes.
	Subscriptions int
	// HeldBack is the number of messages of a sequenced topology waiting
	// for an earlier message of their key (or, released, for a permit):
	// within SourceOptions.MaxHeldBack, see there.
	HeldBack int
	// PoisonedKeys is the number of keys a sequenced FailAll source
	// remembers as poisoned: one per key, however many of its letters
	// were dead-lettered (Poisoned counts those). The source remembers
	// each for its lifetime, or until its reader's assignment leaves the
	// key's partition out (a Kafka rebalance: the partition's new owner
	// handles the key's later letters), the only way it goes down while
	// the source lives; a new source (a restarted consumer) starts with
	// none.
	PoisonedKeys int
	// Refused is the number of letters a full queue refused (ErrFull)
	// that the source keeps, to hand them off again once there is room;
	// it takes no new letters while it is not 0 (see Source).
	Refused int
	// HandOffKept is the number of letters whose hand-off the backend
	// failed with an error other than ErrFull (see HandOffFailed) that
	// the source keeps, unsettled, to hand them off again itself, and of
	// a poisoned key's dead-letterings waiting behind one so kept: at
	// SourceOptions.MaxHeldBack it takes no new letter until the backend
	// takes one of them. Close gives those it still keeps back.
	HandOffKept int
	// SettleFailed counts the letters whose settling the backend refused
	// (Reader.Settle), kafkatopology's ErrRevoked among them: a rebalance
	// took the letter's partition away first, and the group delivers it
	// again. Many come at once when a partition goes with many letters in
	// flight, so the source logs one WARN line for the first and at most
	// one every 10 s after it, each counting the ones it did not log
	// ("held_back"), and a last one as it closes.
	SettleFailed uint64
	// HandOffFailed counts the letters whose hand-off the backend failed
	// at least once with an error other than ErrFull, each delivery of a
	// letter at most once: a hold, a requeue, a dead-lettering or a dead
	// source's putting back on the DLQ (a broker that refuses the hold
	// topic or the DLQ, an ACL taken away, a DLQ over its backlog quota).
	// It is not an outcome: a failed hold or requeue's letter counts in
	// Retried, Deferred or Requeued, a failed dead-lettering's in
	// DeadLetterFailed too and in DeadLettered once the DLQ takes it. The
	// source keeps the letter, unsettled (HandOffKept counts it), and
	// hands it off again itself, after 100ms, then twice as long up to
	// 10s, until the backend takes it (it is settled then, without its
	// handler running again) or the source closes (it is given back);
	// its failed attempts and the backend taking it at last are logged
	// in a few lines (see Source). A hand-off failing with ErrClosed (the
	// backend closing), but for a sequenced key's retried letter, or once
	// the source has closed, is not kept: its letter is settled as it is (a durable backend delivers
	// it again, the in-memory one has lost it), logged at ERROR, one
	// line for the first and at most one every 10 s after it, each
	// counting the ones it did not log ("held_back"), and a last one as
	// it closes.
	HandOffFailed uint64
	// Undecodable counts the letters the source's readers skipped for
	// good because they could not be decoded, logged at WARN by the
	// backend, a burst in a few lines (see UndecodableCounter): a durable
	// backend's only. It includes what the readers the source closed counted, and
	// never goes down.
	Undecodable uint64
	// BroadcastResubscribes counts the times a broadcast reader of the
	// source subscribed again after losing its connection to the broker,
	// once per topic partition, each a window in which it may have missed
	// letters (see ResubscribeCounter): the Pulsar backend's broadcast
	// readers count them, logging each at WARN (a burst in a few lines).
	// It includes what the readers the source closed counted, and never
	// goes down.
	BroadcastResubscribes uint64
}

// DeadReasons counts dead letters by their reason (Death.Reason).
type DeadReasons struct {
	// Rejected: the handler rejected them (ReasonRejected).
	Rejected uint64
	// MaxRetries: they failed again after MaxRetries retries
	// (ReasonMaxRetries).
	MaxRetries uint64
	// Timeout: their handler ran past its timeout on their last allowed
	// attempt (ReasonTimeout).
	Timeout uint64
	// Poisoned: an earlier message of their key was dead-lettered on a
	// sequenced FailAll topology (ReasonPoisoned).
	Poisoned uint64
	// Other: any other reason, which only a dead source putting back a
	// letter that something outside the topology wrote to the DLQ meets.
	Other uint64
}

func (d DeadReasons) total() uint64 {
	return d.Rejected + d.MaxRetries + d.Timeout + d.Poisoned + d.Other
}

// Indexes of Source.deadBy.
const (
	deadRejected = iota
	deadMaxRetries
	deadTimeout
	deadPoisoned
	deadOther
	deadReasons // how many
)

// deadReasonIndex returns the index in Source.deadBy of a dead letter
// whose death is d.
func deadReasonIndex(d *Death) int {
	if d == nil {
		return deadOther
	}
	switch d.Reason {
	case ReasonRejected:
		return deadRejected
	case ReasonMaxRetries:
		return deadMaxRetries
	case ReasonTimeout:
		return deadTimeout
	case ReasonPoisoned:
		return deadPoisoned
	default:
		return deadOther
	}
}

// Source consumes a declared topology into a pipeline (it implements
// producer.Source) and carries out each message's outcome: an ack settles
// it, a retry parks it in a hold queue, a reject dead-letters it. See
// Decide for how an outcome is read from the message's error and
// disposition.
//
// On a sequenced topology the source reads with one producer stage and
// hands the pipeline one message per key at a time, in the order they were published: later messages of a key wait
// in the source while one of the key is in flight or held for a retry, and
// messages of other keys are not held up. At most MaxHeldBack wait so
// (see SourceOptions.MaxHeldBack). It reports itself ordered, with
// each message's partition key its shard, so a pipeline keeps each shard on
// one processor.
//
// A letter whose hand-off (a hold, a requeue, a dead-lettering, a dead
// letter put back) the backend refuses for room, with an error wrapping
// ErrFull, is not lost: the source keeps it, unsettled, and hands it off
// again, after 100ms, then twice as long up to 10s (100ms again after
// an attempt that handed some off), each
// attempt handing off as many of the letters kept as the backend takes,
// in the order they were refused; a hand-off that comes while letters
// are kept goes behind them. While it keeps letters the source takes no
// new letters from its queues (backpressure: Stats.Refused counts them,
// and they number no more than the messages in flight when the refusals
// began). It logs one WARN line when the refusals begin and one INFO
// line once the letters kept are all handed off, not one per attempt.
// Close gives the letters it still keeps back to the backend
// (Queues.Return), ahead of the letters a sequenced source holds back.
//
// A letter whose hand-off the backend fails otherwise (a broker refusing
// the hold topic or the DLQ, an ACL taken away, a quota) is kept too,
// unsettled, and handed off again by the source, after 100ms, then twice
// as long up to 10s, until the backend takes it: it is then settled on
// its reader (committed, acknowledged), without its handler running
// again. The attempts are made one at a time, on one timer, each bounded
// by 30s. The source logs a letter's first failure and each doubling of
// its failed attempts at ERROR, and the backend taking it at last at
// INFO, those lines of all its letters kept to one a kind every 10s. At
// MaxHeldBack letters so kept (Stats.HandOffKept) it takes no new letter
// until the backend takes one. Close gives those it still keeps back
// (Queues.Return). A hand-off that fails with ErrClosed (the backend
// closing), or once the source has closed, is not kept (but a sequenced
// key's retried letter's, while the source is open): its letter is
// settled as it is.
//
// Each producer stage makes its messages in blocks of about 8 KiB
// (message.Slab): the block it is filling keeps the values of the
// messages already made from it reachable after their outcomes, until the
// stage has made the rest of the block's messages: for a value of a slice
// or a string, up to 93 values a stage, which with values of megabytes is
// memory to plan for.
//
// The source numbers its messages from 1 in the order it hands them to
// the pipeline: the id of the outcomes it is given (acker.Outcome.ID),
// and of log lines (message.id). A letter delivered again gets a new
// number; Delivery says what the letter is.
//
// Create it with NewSource (or NewDeadSource for the DLQ). A Source
// neither of them made (a zero value) holds nothing: its Run returns an
// error wrapping topic.ErrNotCreated, and its Close returns nil.
type Source[T any] struct {
	opts   SourceOptions[T]
	t      *Topology
	q      Queues[T]
	log    *slog.Logger
	dead   bool
	seq    *sequencer[T]
	shards []string

	mu sync.Mutex
	// readers are the readers the source holds open, those of failed runs
	// with letters out included (retire.go).
	readers []*heldReader[T]
	closed  bool
	// gone is what the readers no longer in readers counted
	// (UndecodableCounter, ResubscribeCounter), added as each leaves
	// readers and again once it is closed, so that Stats never goes down.
	gone readerCounts

	// retiring closes the readers of failed runs dropped from readers,
	// their letters all settled, on a goroutine of its own (the closer,
	// retire.go); Close waits for it. A reader is only queued, under mu,
	// as it leaves readers, which Close empties for good before it waits,
	// so no closer starts after.
	retiring *liveset.Retiring[*retiredReader[T]]
	// closerCtx bounds the closer's closings; Close cancels it
	// (stopCloser) once its own context ends. closerCut counts the
	// closings that cut short, for Close to report.
	closerCtx  context.Context
	stopCloser context.CancelFunc
	closerCut  int

	// handOffs are the letters whose hand-off failed, which the source
	// hands off again itself (handoff.go).
	handOffs handOffs[T]

	received, acked, retried, deferred, requeued atomic.Uint64
	discarded, poisoned                          atomic.Uint64
	// deadBy counts the dead letters the backend took, by reason (see
	// deadReasonIndex); their sum is Stats.DeadLettered.
	deadBy       [deadReasons]atomic.Uint64
	settleFailed atomic.Uint64
	// settleLog keeps the WARN lines of failed settlings to one per
	// logburst.Interval.
	settleLog    logburst.Limiter
	handOffFails atomic.Uint64
	// deadLetterFails counts the failed hand-offs that were
	// dead-letterings (Stats.DeadLetterFailed).
	deadLetterFails atomic.Uint64
	// handOffLog keeps the ERROR lines of failed hand-offs to one per
	// logburst.Interval.
	handOffLog logburst.Limiter
	// deadLog, poisonLog and discardLog keep the WARN lines of letters
	// dead-lettered, keys poisoned and letters discarded to one a kind
	// per logburst.Interval, each counting the lines it held back.
	deadLog, poisonLog, discardLog logburst.Kind
	// refusedHoldLog and retriedHoldLog keep the ERROR lines of the
	// letters whose hand-off the backend failed that the source keeps,
	// and the INFO lines of those it took at last, to one a kind per
	// logburst.Interval across all its letters (handoff.go).
	refusedHoldLog, retriedHoldLog logburst.Kind
	// negativeLogged is set once a letter with a negative retry count
	// was logged.
	negativeLogged atomic.Bool
	// lastID is the id of the last message the source made: it numbers
	// its messages from 1, in the order it hands them to the pipeline.
	lastID atomic.Uint64
}

// NewSource validates opts and returns a source over the main topic of
// opts.Queues.
func NewSource[T any](opts SourceOptions[T]) (*Source[T], error) {
	return newSource(opts, false)
}

// NewDeadSource validates opts and returns a source over the DLQ of
// opts.Queues. Its messages carry the dead letters' Delivery with Death
// set. A message that succeeds is removed from the DLQ; one that fails goes
// back to the DLQ's tail, unless its disposition is
// acker.DispositionDiscard (it is then dropped). MaxRetries does not apply.
func NewDeadSource[T any](opts SourceOptions[T]) (*Source[T], error) {
	return newSource(opts, true)
}

func newSource[T any](opts SourceOptions[T], dead bool) (*Source[T], error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	t := opts.Queues.Topology()
	if dead && t.dlq == "" {
		return nil, fmt.Errorf("topology %s: %w", t.name, ErrNoDLQ)
	}
	s := &Source[T]{opts: opts, t: t, q: opts.Queues, dead: dead,
		log:            opts.Logger.With(slog.String("topology", t.name)),
		deadLog:        logburst.NewKind(0, slog.LevelWarn, deadLetteredLog),
		poisonLog:      logburst.NewKind(0, slog.LevelWarn, poisonedLog),
		discardLog:     logburst.NewKind(0, slog.LevelWarn, discardedLog),
		refusedHoldLog: logburst.NewKind(0, slog.LevelError, refusedHoldLog),
		retriedHoldLog: logburst.NewKind(0, slog.LevelInfo, retriedHoldLog)}
	s.closerCtx, s.stopCloser = context.WithCancel(context.Background())
	s.retiring = liveset.NewRetiring(s.closeRetired)
	s.handOffs.retryLimit = opts.MaxHeldBack
	if f, ok := t.Sequenced(); ok && !dead {
		s.seq = &sequencer[T]{policy: f, shards: t.shards, limit: opts.MaxHeldBack, keys: map[string]*keyState[T]{}, wakers: map[*waker]struct{}{}}
		s.shards = make([]string, t.shards)
		for i := range s.shards {
			s.shards[i] = t.name + "#" + strconv.Itoa(i)
		}
	}
	return s, nil
}

// errZeroSource is what Run returns on a Source neither NewSource nor
// NewDeadSource made.
var errZeroSource = fmt.Errorf("topology: zero Source (make one with NewSource or NewDeadSource): %w", topic.ErrNotCreated)

// Info reports the source ordered when its topology is sequenced.
func (s *Source[T]) Info() (producer.Info, error) {
	return producer.Info{Ordered: s.seq != nil}, s.opts.Validate()
}

// Stats returns the source's counters.
func (s *Source[T]) Stats() Stats {
	// A letter is counted received before any outcome of it (acked,
	// retried, deferred, requeued, dead-lettered by reason, discarded):
	// the outcomes are read first and Received last, so that a reading
	// never shows more letters with an outcome than letters received.
	st := Stats{
		Acked: s.acked.Load(), Retried: s.retried.Load(),
		Deferred: s.deferred.Load(), Requeued: s.requeued.Load(),
		Discarded: s.discarded.Load(), Poisoned: s.poisoned.Load(),
		SettleFailed: s.settleFailed.Load(), HandOffFailed: s.handOffFails.Load(),
		DeadLetterFailed: s.deadLetterFails.Load(),
	}
	if s.seq != nil {
		st.HeldBack = s.seq.heldBack()
		st.PoisonedKeys = s.seq.poisonedKeys()
	}
	st.DeadLetteredBy = DeadReasons{
		Rejected: s.deadBy[deadRejected].Load(), MaxRetries: s.deadBy[deadMaxRetries].Load(),
		Timeout: s.deadBy[deadTimeout].Load(), Poisoned: s.deadBy[deadPoisoned].Load(), Other: s.deadBy[deadOther].Load(),
	}
	st.DeadLettered = st.DeadLetteredBy.total()
	st.Received = s.received.Load()
	st.Refused = int(s.handOffs.keptN.Load())
	st.HandOffKept = s.handOffs.keptForRetry()
	s.mu.Lock()
	st.Subscriptions = len(s.readers)
	c := s.gone
	for _, h := range s.readers {
		c.add(countsOf(h.rd))
	}
	st.Undecodable, st.BroadcastResubscribes = c.undecodable, c.resubscribes
	s.mu.Unlock()
	return st
}

// record is the ack data of one delivered message.
type record[T any] struct {
	pendingLetter[T]
	md Delivery
}

// Run subscribes one reader for the stage and delivers letters under the
// stage's permit window until ctx is cancelled or the source is closed
// (then it returns nil). A backend closed under the source (its Close
// called while the pipeline still runs) is a failure: Run returns an
// error wrapping ErrClosed, and so does every later run while the source
// is open, at once, so that the stage gives up under its restart rules.
// Close the backend after the pipeline has stopped. A run that fails (its
// reader's Receive returns an error, or it panics) retires its reader,
// which is closed once the letters it handed out are all settled, those
// a sequenced source holds back behind their key being given back to the
// backend at once (Queues.Return); the stage runs the source again with
// a new reader.
//
// While the run's reader cannot read from its broker (see
// ReachReporter: a Kafka or Pulsar reader), the stage is degraded
// (producer.RunHealth.Degrade), with the backend's error as its
// LastError, and the run goes on; it runs again once the reader reads.
// A run whose reader cannot read as it starts is degraded from the
// start. The in-memory backend's readers never report: their stages stay
// running.
//
// A broadcast topology is read by the first producer stage only (the others
// return at once), so that each message enters the pipeline once whatever
// the producer concurrency; so is a sequenced one, whose order per key is
// the order in which its one reader receives.
//
// A nil ctx returns ErrNilContext at once, nothing subscribed or received.
func (s *Source[T]) Run(ctx context.Context, stage *producer.Stage[T]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s.t == nil {
		return errZeroSource
	}
	if (s.t.broadcast || s.seq != nil) && stage.Index() > 0 {
		return nil
	}
	h, err := s.subscribe(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrClosed) && s.isClosed() {
			return nil
		}
		return s.closedUnder(err)
	}
	if s.t.broadcast {
		// The ephemeral subscription must not outlive the run: it would
		// keep collecting every message (and, full, hold publishers up)
		// until the source closes. What it delivered needs no settling,
		// so the run's context, done when the pipeline stops, bounds the
		// closing: the run does not hold the stop up.
		defer s.unsubscribe(ctx, h)
		return s.read(ctx, stage, h)
	}
	ended := false
	defer func() {
		if !ended { // failed: an error, or a panic
			s.retire(ctx, h)
		}
	}()
	err = s.read(ctx, stage, h)
	ended = err == nil
	return err
}

// read is Run's receiving from h once subscribed.
func (s *Source[T]) read(ctx context.Context, stage *producer.Stage[T], h *heldReader[T]) error {
	r := h.rd
	feed := stage.NewFeed(fmt.Sprintf("%s/%d", s.t.name, stage.Index()), nil)
	if rn, ok := r.(ReleaseNotifier); ok {
		// The reader outlives the run: once it has returned, a release
		// hurries nothing.
		rn.OnRelease(feed.FlushInFlight)
		defer rn.OnRelease(nil)
	}
	if sn, ok := r.(ShardNotifier); ok && s.seq != nil {
		// A key's message out comes back to whichever reader holds its
		// shard then: told that this one let go of it, the source stops
		// holding the key's letters back for it.
		h.parts, _ = r.(PartTracker)
		sn.OnShards(func(change ShardChange, in func(shard int) bool) { s.shardsChanged(ctx, h, change, in) })
		defer sn.OnShards(nil)
	}
	if rr, ok := r.(ReachReporter); ok {
		// The stage is degraded while its reader cannot read. A failed
		// run's reader stays open for its letters out: its reports reach
		// no later run.
		rr.ReportReach(stage.Health())
		defer rr.ReportReach(nil)
	}
	// A batch never exceeds the feed's permits: MaxBatch is only a bound,
	// which the permit window may keep far below.
	size := min(s.opts.MaxBatch, stage.Flow().MaxWindow())
	buf := make([]Letter[T], size)
	out := make([]pendingLetter[T], 0, size)
	var slab message.Slab[T]    // the run's messages, and a sequenced source's keys, in blocks
	var back []pendingLetter[T] // letters of shards r let go of, to give back
	have := 0
	// A sequenced run waits on its reader with wctx, which the sequencer
	// cancels when letters become ready.
	wctx := ctx
	var w *waker
	if s.seq != nil {
		w = &waker{}
		wctx = s.seq.watch(ctx, w)
		defer s.seq.unwatch(w)
	}
	for {
		if have == 0 {
			n, err := feed.Acquire(ctx, s.opts.MaxBatch)
			if err != nil {
				return nil
			}
			have = n
			if have > len(buf) {
				buf = make([]Letter[T], have)
			}
		}
		out = out[:0]
		if s.seq != nil {
			if ctx.Err() != nil {
				// Stopping: the ready letters stay for Close to give
				// back, ahead of their keys' held-back ones.
				return nil
			}
			out = s.seq.takeReady(out, have)
		}
		if len(out) == 0 {
			want := have
			if s.seq != nil {
				room, first := s.seq.room(have)
				if first {
					s.log.WarnContext(ctx, "held-back letters at MaxHeldBack all wait on messages out in hold queues: taking letters past it until one comes back",
						slog.Int("max_held_back", s.opts.MaxHeldBack))
				}
				if room == 0 {
					// At MaxHeldBack: nothing is taken until a letter
					// held back goes (the sequencer wakes wctx then).
					<-wctx.Done()
					if ctx.Err() != nil {
						return nil
					}
					wctx = s.seq.watch(ctx, w)
					continue
				}
				want = room
			}
			if room := s.handOffs.roomWait(); room != nil {
				// A full queue refused letters, or the backend
				// refused the hand-offs of MaxHeldBack retries, which
				// the source keeps: it takes no new ones until they
				// are handed off (backpressure), but still delivers a
				// sequenced key's ready letters.
				select {
				case <-room:
				case <-wctx.Done():
				}
				if ctx.Err() != nil {
					return nil
				}
				if s.seq != nil && wctx.Err() != nil {
					wctx = s.seq.watch(ctx, w)
				}
				continue
			}
			if s.seq != nil {
				s.seq.taking(h)
			}
			n, err := r.Receive(wctx, buf[:want])
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrClosed) && s.isClosed() {
					return nil
				}
				if errors.Is(err, ErrClosed) {
					return s.closedUnder(err)
				}
				if wctx.Err() != nil {
					// Woken: ready letters wait.
					wctx = s.seq.watch(ctx, w)
					continue
				}
				return err
			}
			s.received.Add(uint64(n))
			h.out.Add(int64(n))
			for i := range n {
				if buf[i].Retries < 0 {
					s.negativeRetries(ctx, &buf[i])
				}
				out, back = s.admit(ctx, out, back, buf[i], h)
				buf[i] = Letter[T]{}
			}
			if len(back) > 0 {
				s.returnHeld(ctx, back, shardGiveBackFailedLog)
				clear(back)
				back = back[:0]
			}
		}
		if len(out) > 0 {
			feed.Deliver(s.messages(&slab, out)...)
			have -= len(out)
			clear(out)
		}
	}
}

// negativeRetries counts as 0 the negative retry count of l, which a
// backend reported, and logs it the first time only: a retry count picks
// a hold queue, and a backend that gets it wrong once likely gets it
// wrong for every letter.
func (s *Source[T]) negativeRetries(ctx context.Context, l *Letter[T]) {
	if s.negativeLogged.CompareAndSwap(false, true) {
		s.log.WarnContext(ctx, "a letter with a negative retry count: counted as 0",
			slog.Int("retries", l.Retries), slog.String("key", l.Key),
			slog.String("note", "logged once per source"))
	}
	l.Retries = 0
}

// subscribe adds a reader, without holding s.mu while the backend
// subscribes (a broker may take its time: Stats must not wait for it). A
// reader that a Subscribe returns once the source has closed is closed
// at once, within ctx; a failure or panic of its Close is logged (WARN).
func (s *Source[T]) subscribe(ctx context.Context) (*heldReader[T], error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	var r Reader[T]
	var err error
	if s.dead {
		r, err = s.q.SubscribeDead(ctx)
	} else {
		r, err = s.q.Subscribe(ctx)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if err := closeReader(ctx, r); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, lateCloseFailedLog, slog.Any("error", err))
		}
		s.countClosed(r, readerCounts{})
		return nil, ErrClosed
	}
	h := &heldReader[T]{rd: r}
	s.readers = append(s.readers, h)
	s.mu.Unlock()
	return h, nil
}

// isClosed reports whether the source's Close was called.
func (s *Source[T]) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// closedUnder is what Run returns for err, an error of the backend: when
// it wraps ErrClosed (the backend, or the reader, was closed while the
// source was open) it says so, still wrapping ErrClosed.
func (s *Source[T]) closedUnder(err error) error {
	if errors.Is(err, ErrClosed) {
		return fmt.Errorf("topology %s: the backend was closed under the running source: %w", s.t.name, err)
	}
	return err
}

// lateCloseFailedLog is the message of the line subscribe logs when
// closing a reader subscribed after the source closed fails.
const lateCloseFailedLog = "closing a reader subscribed after the source closed failed"

// unsubscribe closes h, within ctx, and forgets it. A closing that ctx
// cuts short is no failure: h has nothing to commit.
func (s *Source[T]) unsubscribe(ctx context.Context, h *heldReader[T]) {
	s.mu.Lock()
	held := false
	var counted readerCounts
	if i := slices.Index(s.readers, h); i >= 0 {
		s.readers = slices.Delete(s.readers, i, i+1)
		held, counted = true, s.countGone(h.rd)
	}
	s.mu.Unlock()
	if err := closeReader(ctx, h.rd); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, broadcastCloseFailedLog, slog.Any("error", err))
	}
	if held { // otherwise Close took it, and counts it
		s.countClosed(h.rd, counted)
	}
}

// broadcastCloseFailedLog is the message of the line unsubscribe logs
// when closing a broadcast reader fails.
const broadcastCloseFailedLog = "closing a broadcast reader failed"

// countGone adds what r counted so far (UndecodableCounter,
// ResubscribeCounter) to the counts of the readers gone, as r leaves
// s.readers, and returns it; s.mu is held.
func (s *Source[T]) countGone(r Reader[T]) readerCounts {
	c := countsOf(r)
	s.gone.add(c)
	return c
}

// countClosed adds what r, now closed, counted since countGone counted
// it (counted then).
func (s *Source[T]) countClosed(r Reader[T], counted readerCounts) {
	if more := countsOf(r).since(counted); more != (readerCounts{}) {
		s.mu.Lock()
		s.gone.add(more)
		s.mu.Unlock()
	}
}

// admit appends l, received from r, to out if it may be delivered now,
// and to back if it is to go back to the backend (r let go of its
// shard, see sequencer.admit); the caller gives back's letters back.
func (s *Source[T]) admit(ctx context.Context, out, back []pendingLetter[T], l Letter[T], r *heldReader[T]) ([]pendingLetter[T], []pendingLetter[T]) {
	if s.seq == nil {
		return append(out, pendingLetter[T]{l: l, r: r}), back
	}
	switch s.seq.admit(l, r) {
	case admitDeliver:
		out = append(out, pendingLetter[T]{l: l, r: r})
	case admitGiveBack:
		back = append(back, pendingLetter[T]{l: l, r: r})
	case admitPoisoned:
		s.poisonLetter(ctx, &pendingLetter[T]{l: l, r: r}, s.seq.follow(l.Key))
	}
	return out, back
}

// messages turns letters into messages taken from slab, the run's (the
// messages, and a sequenced source's partition keys, come in blocks: no
// allocation per message), and numbers them (see Source).
func (s *Source[T]) messages(slab *message.Slab[T], ls []pendingLetter[T]) []*message.Message[T] {
	first := s.lastID.Add(uint64(len(ls))) - uint64(len(ls)) + 1
	recs := make([]record[T], len(ls))
	ptrs := make([]*message.Message[T], len(ls))
	for i := range ls {
		rec := &recs[i]
		rec.l, rec.r = ls[i].l, ls[i].r
		l := &rec.l
		rec.md = Delivery{Topic: s.t.name, Group: s.t.ConsumerGroup(), Key: l.Key, Shard: l.Shard,
			Retries: l.Retries, FirstFailure: l.FirstFailure, LastFailure: l.LastFailure, Death: l.Death, Headers: l.Headers}
		var key string
		if s.seq != nil && l.Shard >= 0 && l.Shard < len(s.shards) {
			key = s.shards[l.Shard]
		}
		m := slab.NewKeyed(l.Value, s, first+uint64(i), key)
		m.SetAckData(rec)
		m.Metadata = &rec.md
		ptrs[i] = m
	}
	return ptrs
}

// Ack carries out the outcome of each message (acker.Acknowledger).
//
// The records of the messages delivered together are allocated together
// (see messages), and a record lives as long as any of them: each drops
// its letter once settled, so that the value of a message settled is not
// kept by the messages of its batch still reachable (those made from the
// next slab block, for one).
func (s *Source[T]) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	for i := range successful {
		if rec, ok := successful[i].Data.(*record[T]); ok {
			s.settle(ctx, rec, OutcomeAck, false, nil)
			rec.pendingLetter = pendingLetter[T]{}
		}
	}
	for i := range failed {
		if rec, ok := failed[i].Data.(*record[T]); ok {
			out, timeout := Decide(failed[i])
			s.settle(ctx, rec, out, timeout, failed[i].Err)
			rec.pendingLetter = pendingLetter[T]{}
		}
	}
}

func (s *Source[T]) settle(ctx context.Context, rec *record[T], out Outcome, timeout bool, err error) {
	if s.dead {
		s.settleDead(ctx, rec, out, err)
		return
	}
	p := &rec.pendingLetter
	now := time.Now()
	switch out {
	case OutcomeAck:
		s.acked.Add(1)
		s.done(ctx, p)
		s.release(p.l)
	case OutcomeRetry:
		stamp(&p.l, now)
		if p.l.Retries >= max(s.opts.MaxRetries, 0) {
			reason := ReasonMaxRetries
			if timeout {
				reason = ReasonTimeout
			}
			s.kill(ctx, p, reason, err)
			return
		}
		s.countBack(&s.retried)
		p.l.Retries++
		s.hold(ctx, p, s.t.holdFor(p.l.Retries-1))
	case OutcomeDefer:
		s.countBack(&s.deferred)
		s.hold(ctx, p, s.t.holdFor(p.l.Retries))
	case OutcomeReject:
		stamp(&p.l, now)
		s.kill(ctx, p, ReasonRejected, err)
	default: // OutcomeRequeue
		if s.seq != nil && p.l.Key != "" && s.seq.putBack(*p) {
			// Not handled: the pipeline is stopping, or the failure
			// wraps a shutdown elsewhere (a tracked sink's downstream).
			// The letter keeps its key's turn, ahead of the messages of
			// its key held back: a running source delivers it again,
			// and Close returns it. After Close it is requeued. The
			// letter is received again from the source itself rather
			// than from a queue: counted so before its requeue, so that
			// each delivery has its outcome.
			s.received.Add(1)
			s.countBack(&s.requeued)
			return
		}
		s.countBack(&s.requeued)
		s.requeue(ctx, p)
	}
}

// countBack counts in c a letter sent back to be delivered again
// (retried, deferred, requeued), unless the topology is a broadcast one:
// it cannot deliver a letter again, and discards it instead, counted in
// Discarded only.
func (s *Source[T]) countBack(c *atomic.Uint64) {
	if !s.t.broadcast {
		c.Add(1)
	}
}

func stamp[T any](l *Letter[T], now time.Time) {
	if l.FirstFailure.IsZero() {
		l.FirstFailure = now
	}
	l.LastFailure = now
}

// done settles p on its reader. A failure is counted, and logged within
// the bounds of settleLog. A retired reader whose last letter out that was
// is closed (settledOne). A Settle that panics fails as one that returns
// the *message.PanicError does, whichever goroutine settles (a message's
// acknowledgement, the source's own hand-off attempt on a timer's).
func (s *Source[T]) done(ctx context.Context, p *pendingLetter[T]) {
	s.settled(ctx, p, settleOn(ctx, p.r.rd, &p.l))
}

// settled counts p, settled on its reader with err.
func (s *Source[T]) settled(ctx context.Context, p *pendingLetter[T], err error) {
	if err != nil {
		s.settleFailed.Add(1)
		s.settleLog.Log(ctx, s.log, slog.LevelWarn, settleFailedLog, slog.Any("error", err))
	}
	s.settledOne(p.r)
}

// closeReader closes r, on one of the source's goroutines, and returns a
// panic in the backend's Close as a *message.PanicError: the reader counts
// as closed, with that error.
func closeReader[T any](ctx context.Context, r Reader[T]) (err error) {
	defer message.Recover(&err)
	return r.Close(ctx)
}

// settleOn settles l on r and returns a panic in Settle as a
// *message.PanicError.
func settleOn[T any](ctx context.Context, r Reader[T], l *Letter[T]) (err error) {
	defer message.Recover(&err)
	return r.Settle(ctx, l)
}

// settleFailedLog is the message of the lines done logs.
const settleFailedLog = "could not settle a letter"

// settleFailedLastLog is the message of the line Close logs when failed
// settlings were counted and not logged since done's last line.
const settleFailedLastLog = "could not settle letters since the last line; they were counted, not logged"

// handOffNotTaken deals with p, whose hand-off of l as kind says (what,
// for logs: hold, requeue, dead-letter, put back on the DLQ) the backend
// failed with err: the source keeps p and hands l off again itself until
// the backend takes it (retryHandOff). It does not when the source has
// closed, nor when err wraps ErrClosed (the backend or the source is
// closing) unless closedToo (a sequenced key's letter out, kept then too):
// the hand-off then counts as failed (handOffFailed) and p is settled.
func (s *Source[T]) handOffNotTaken(ctx context.Context, p *pendingLetter[T], l Letter[T], kind handOffKind, hold int, closedToo bool, err error, what string, attrs ...slog.Attr) {
	if (closedToo || !errors.Is(err, ErrClosed)) && s.retryHandOff(p, l, kind, hold, err) {
		return
	}
	if kind == handOffDeadLetter {
		s.deadLetterFails.Add(1)
	}
	s.handOffFailed(ctx, what, err, attrs...)
	s.done(ctx, p)
}

// handOffFailed counts a letter's hand-off (what: hold, requeue,
// dead-letter, put back on the DLQ) that failed with err and that the
// source does not keep (see handOffNotTaken), and logs it at ERROR within
// the bounds of handOffLog. The letter is then settled as it is, and the
// backend decides its fate: a durable one (Kafka, Pulsar) does not commit
// or acknowledge a letter whose hand-off failed, and delivers it to the
// group again; the in-memory one, which removed it from its queue when it
// was received, has lost it.
func (s *Source[T]) handOffFailed(ctx context.Context, what string, err error, attrs ...slog.Attr) {
	s.handOffFails.Add(1)
	s.handOffLog.Log(ctx, s.log, slog.LevelError, handOffFailedLog,
		append(attrs, slog.String("hand_off", what), slog.Any("error", err))...)
}

// handOffFailedLog is the message handOffFailed logs.
const handOffFailedLog = "could not hand a letter to the backend; a durable backend delivers it again, the in-memory one loses it"

// handOffFailedLastLog is the message of the line Close logs when failed
// hand-offs were held back since the last line.
const handOffFailedLastLog = "could not hand letters to the backend since the last line; they were counted, not logged"

// release lets the next held-back message of l's key go.
func (s *Source[T]) release(l Letter[T]) {
	if s.seq != nil && l.Key != "" {
		s.seq.release(l.Key)
	}
}

// hold parks p in hold queue i; without hold queues it is delivered again at
// once, and on a broadcast topology (which has neither) it is discarded.
func (s *Source[T]) hold(ctx context.Context, p *pendingLetter[T], i int) {
	if s.t.broadcast {
		s.discard(ctx, p, "a broadcast topology cannot retry")
		return
	}
	if len(s.t.holds) == 0 {
		s.requeue(ctx, p)
		return
	}
	p.l.Resume = s.seq != nil && p.l.Key != ""
	if p.l.Resume {
		s.seq.sentOut(&p.l)
	}
	if err := s.handOff(ctx, p, p.l, handOffHold, i); err != nil {
		s.handOffNotTaken(ctx, p, p.l, handOffHold, i, p.l.Resume, err, "hold", slog.String("hold", s.t.holds[i].Name))
	}
}

func (s *Source[T]) requeue(ctx context.Context, p *pendingLetter[T]) {
	if s.t.broadcast {
		s.discard(ctx, p, "a broadcast topology cannot deliver again")
		return
	}
	p.l.Resume = s.seq != nil && p.l.Key != ""
	if p.l.Resume {
		s.seq.sentOut(&p.l)
	}
	if err := s.handOff(ctx, p, p.l, handOffRequeue, 0); err != nil {
		s.handOffNotTaken(ctx, p, p.l, handOffRequeue, 0, p.l.Resume, err, "requeue")
	}
}

func (s *Source[T]) discard(ctx context.Context, p *pendingLetter[T], why string) {
	s.discarded.Add(1)
	s.discardLog.Line(ctx, s.log, slog.String("why", why),
		slog.String("key", p.l.Key), slog.Int("retries", p.l.Retries))
	s.done(ctx, p)
}

// The messages of the WARN lines of letters discarded, dead-lettered and
// of keys poisoned. Like lines within logburst.Interval of the last are
// counted, not logged: the next line, or the one the source's Close
// logs, carries their count (logburst.HeldBackKey).
const (
	discardedLog    = "message discarded"
	deadLetteredLog = "message dead-lettered"
	poisonedLog     = "key poisoned: its messages go to the dead-letter queue until the source closes or no longer reads the key"
)

// kill dead-letters p; on a sequenced FailAll topology it poisons p's key
// (unless it is empty) and dead-letters the messages of the key held back.
func (s *Source[T]) kill(ctx context.Context, p *pendingLetter[T], reason Reason, err error) {
	text := ""
	if err != nil {
		text = err.Error()
	}
	if s.seq != nil && s.seq.policy == FailAll && p.l.Key != "" {
		s.poisonLog.Line(ctx, s.log, slog.String("key", p.l.Key), slog.String("reason", string(reason)),
			slog.String("error", BoundDeathError(text)), slog.String("dlq", s.t.dlq))
		s.poisonLetter(ctx, p, text)
		// The key's held-back messages are dead-lettered in order, and so
		// are those that arrive meanwhile, before any later one is
		// dead-lettered on arrival: the DLQ keeps the key's order. While
		// a dead-lettering of the key is kept (the DLQ failed it), the
		// later ones wait behind it (followKept).
		follow := BoundDeathError(poisonedBy(p.l.Key, text))
		ws := s.seq.poison(p.l.Key, p.l.Shard, follow)
		for {
			for i := range ws {
				s.poisonLetter(ctx, &ws[i], follow)
			}
			if ws = s.seq.drained(p.l.Key); len(ws) == 0 {
				break
			}
		}
		return
	}
	s.deadLetter(ctx, p, reason, text)
	s.release(p.l)
}

// poisonedBy is the dead-letter error of a message of key, poisoned by an
// earlier message that failed with cause.
func poisonedBy(key, cause string) string {
	text := "key " + strconv.Quote(key) + " poisoned by an earlier message"
	if cause != "" {
		text += ": " + cause
	}
	return text
}

// poisonLetter dead-letters p, whose key is poisoned, with error text.
func (s *Source[T]) poisonLetter(ctx context.Context, p *pendingLetter[T], text string) {
	if text == "" {
		text = poisonedBy(p.l.Key, "")
	}
	stamp(&p.l, time.Now())
	s.poisoned.Add(1)
	s.deadLetter(ctx, p, ReasonPoisoned, text)
}

func (s *Source[T]) deadLetter(ctx context.Context, p *pendingLetter[T], reason Reason, text string) {
	if s.t.dlq == "" {
		s.discard(ctx, p, "no dead-letter queue: "+string(reason)+": "+text)
		return
	}
	l := p.l
	l.Death = &Death{Reason: reason, Error: BoundDeathError(text), Topic: s.t.name, Group: s.t.ConsumerGroup(),
		Retries: l.Retries, FirstFailure: l.FirstFailure, LastFailure: l.LastFailure}
	if reason == ReasonPoisoned && s.followKept(p, l) {
		return // behind the key's earlier dead-lettering, kept
	}
	if err := s.handOff(ctx, p, l, handOffDeadLetter, 0); err != nil {
		s.handOffNotTaken(ctx, p, l, handOffDeadLetter, 0, false, err, "dead-letter", slog.String("dlq", s.t.dlq), slog.String("reason", string(reason)))
	}
}

// settleDead carries out the outcome of a dead letter: success removes it,
// a failure puts it back on the DLQ unless it is to be discarded.
func (s *Source[T]) settleDead(ctx context.Context, rec *record[T], out Outcome, err error) {
	p := &rec.pendingLetter
	switch out {
	case OutcomeAck:
		s.acked.Add(1)
	case OutcomeReject:
		s.discarded.Add(1)
		s.discardLog.Line(ctx, s.log, slog.String("why", "a dead letter was rejected"),
			slog.String("key", p.l.Key), slog.Any("error", err))
	default:
		if qerr := s.handOff(ctx, p, p.l, handOffDeadLetter, 0); qerr != nil {
			s.handOffNotTaken(ctx, p, p.l, handOffDeadLetter, 0, false, qerr, "put back on the DLQ")
		}
		return
	}
	s.done(ctx, p)
}

// Close gives the letters the source keeps for room (see Source), the
// messages a sequenced source still holds back, and those
// of its keys whose handling the pipeline's shutdown interrupted, back to
// the backend (Queues.Return), in the order they were received: the next
// consumer of the group receives them first, in that order, so each key's
// order holds across a stop. Then it closes the readers the source
// subscribed, all at once, each within ctx (Reader.Close), those of
// failed runs with letters still out included, and waits, within ctx, for
// the closings of failed runs' readers already under way (see Run): it
// returns by ctx's deadline, with an error wrapping ctx.Err() when a
// reader's closing was cut short. Failed settlings counted and not logged since the last
// line about them (see Stats.SettleFailed) get one last WARN line.
// Idempotent: a later call returns nil at once. A nil ctx returns
// ErrNilContext and leaves the source as it was, open: call Close again
// with a context.
func (s *Source[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s.t == nil {
		return nil // a zero Source: nothing to close
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	rs := s.readers
	s.readers = nil
	counted := make([]readerCounts, len(rs))
	for i, h := range rs {
		counted[i] = s.countGone(h.rd)
	}
	s.mu.Unlock()
	var err error
	// A letter waiting for its hand-off again (a key's, or one a full
	// queue refused) goes back ahead of the letters held back.
	ls := s.handOffs.close()
	if s.seq != nil {
		for _, p := range s.seq.drain() {
			ls = append(ls, p.l)
		}
	}
	if len(ls) > 0 {
		if err = s.q.Return(ctx, ls); err != nil {
			err = fmt.Errorf("topology %s: returning %d held-back letters: %w", s.t.name, len(ls), err)
			s.log.ErrorContext(ctx, "could not give back the held-back letters; they are lost",
				slog.Int("letters", len(ls)), slog.Any("error", err))
		}
	}
	cerr := liveset.CloseEach(rs, func(h *heldReader[T]) error { return closeReader(ctx, h.rd) })
	for i, h := range rs {
		s.countClosed(h.rd, counted[i])
	}
	// The closer closes failed runs' readers whose letters are all
	// settled: within ctx.
	stop := context.AfterFunc(ctx, s.stopCloser)
	s.retiring.Wait()
	stop()
	s.stopCloser()
	s.mu.Lock()
	if s.closerCut > 0 {
		cerr = errors.Join(cerr, fmt.Errorf("the closing of %d failed runs' readers: %w", s.closerCut, ctx.Err()))
	}
	s.mu.Unlock()
	if cerr != nil {
		cerr = fmt.Errorf("topology %s: closing its readers: %w", s.t.name, cerr)
	}
	s.settleLog.Flush(ctx, s.log, slog.LevelWarn, settleFailedLastLog)
	s.handOffLog.Flush(ctx, s.log, slog.LevelError, handOffFailedLastLog)
	for _, k := range []*logburst.Kind{&s.deadLog, &s.poisonLog, &s.discardLog, &s.refusedHoldLog, &s.retriedHoldLog} {
		k.FlushHeld(ctx, s.log)
	}
	return errors.Join(err, cerr)
}
