// Package message defines the unit that flows through a pipeline: a payload
// with its source's metadata, a reference to the acknowledger that must learn
// its outcome, and the routing a processor gives it (batcher, batch key,
// batch mode).
//
// The package starts no goroutines and does no I/O.
package message

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/boulevard-go/boulevard/acker"
)

// DefaultBatcher is the batcher a message goes to unless a processor routes it
// elsewhere with SetBatcher.
const DefaultBatcher = "default"

// ErrFailed is the error a message carries when it was failed with a nil
// error.
var ErrFailed = errors.New("message: failed")

// BatchMode says when the batch a message joins is emitted.
type BatchMode uint8

const (
	// Bulk (the default) lets the batch grow until its size or timeout.
	Bulk BatchMode = iota
	// Flush emits the batch the message joins as soon as the message is
	// added, with trigger Flush.
	Flush
)

// String returns "bulk" or "flush".
func (m BatchMode) String() string {
	if m == Flush {
		return "flush"
	}
	return "bulk"
}

// Status is where a message stands.
type Status uint8

const (
	// StatusOK is a message that has not failed (yet).
	StatusOK Status = iota
	// StatusFailed is a message that was failed; Err says why.
	StatusFailed
)

// String returns "ok" or "failed".
func (s Status) String() string {
	if s == StatusFailed {
		return "failed"
	}
	return "ok"
}

// Message is one piece of data travelling through a pipeline.
//
// A source creates it with New (or Init) and sets Metadata; processors read
// and replace Data, route it with SetBatcher / SetBatchKey / SetBatchMode and
// may Fail it; batch handlers may Fail single messages of a batch. The last
// stage that handles it reports its outcome to the acknowledger it carries.
//
// A Message is owned by one stage at a time and is not safe for concurrent
// use.
//
// Once its outcome has been reported to its acknowledger, a message belongs
// to its source again, which may reuse it for a later message: the Kafka
// source does, so that it allocates nothing per record. Handlers, batch
// handlers and hooks must therefore not keep a *Message, or its Metadata,
// past the call that handed it to them (a deferred message, see Defer,
// until its outcome is reported); copy what is needed instead. The payload
// itself is not reused by the framework (whether its bytes are is up to the
// source, and documented there).
type Message[T any] struct {
	// Data is the payload.
	Data T
	// Metadata is what the source knows about the message, as a typed value
	// of the source's own (for example a *kafka.Metadata). Read it with
	// MetadataAs.
	Metadata any

	// What every message needs to be acknowledged comes next, 48 bytes
	// with Metadata's 16 making the 64-byte header (see
	// docs/architecture.md, "The message in memory").
	ack acker.Acknowledger
	id  uint64
	// aux is the source's ack data (SetAckData), or, once a rarely used
	// field is set, the *extra that holds the ack data with those fields.
	// Only this package can make an *extra, so the two never mix up.
	aux any
	st  state
}

// state is the message's flags, 7 bytes that clear in one store.
type state struct {
	status      Status
	disposition acker.Disposition
	mode        BatchMode
	deferred    bool
	interrupted bool
	ackNow      bool // AckImmediately was called
	acked       bool // the outcome was reported already: AddTo skips it
}

// extra holds the fields most messages never set: the error of a failed
// message, the routing a processor chose, the source's partition key. It
// is allocated the first time one of them is set to something other than
// its zero value, so the common message costs no second allocation.
type extra struct {
	ackData  any
	err      error
	partKey  string
	batcher  string
	batchKey string
}

// extra returns m's extra fields, nil when none was ever set.
func (m *Message[T]) extra() *extra {
	x, _ := m.aux.(*extra)
	return x
}

// ensureExtra returns m's extra fields, allocating them on first use and
// moving the ack data into them.
func (m *Message[T]) ensureExtra() *extra {
	if x, ok := m.aux.(*extra); ok {
		return x
	}
	x := &extra{ackData: m.aux}
	m.aux = x
	return x
}

// ackData is the source's ack data.
func (m *Message[T]) ackData() any {
	if x, ok := m.aux.(*extra); ok {
		return x.ackData
	}
	return m.aux
}

// New returns a message carrying data whose outcome goes to ack with the
// per-message identifier id. A nil ack means acker.Discard.
func New[T any](data T, ack acker.Acknowledger, id uint64) *Message[T] {
	return &Message[T]{Data: data, ack: ack, id: id}
}

// Init (re)initialises m in place, for sources that allocate messages in
// blocks. It clears everything New would not set. It writes field by field
// rather than the whole struct, so that a message in a block the garbage
// collector is scanning costs a few write barriers, not a bulk one.
func (m *Message[T]) Init(data T, ack acker.Acknowledger, id uint64) {
	m.Data = data
	if m.Metadata != nil {
		m.Metadata = nil
	}
	m.ack = ack
	m.id = id
	if m.aux != nil {
		m.aux = nil
	}
	m.st = state{}
}

// Reuse prepares m, whose outcome has been reported, to carry data under the
// per-message identifier id, for sources that reuse their messages. It
// keeps what the source set for the previous message (acknowledger, ack
// data, Metadata, partition key) and clears what stages set (status,
// error, disposition, batcher, batch key, batch mode, deferral,
// interruption, immediate acknowledgement), as Init would. It writes a
// field only when it changes, which keeps the garbage collector's write
// barriers off the unchanged ones.
func (m *Message[T]) Reuse(data T, id uint64) {
	m.Data = data
	m.id = id
	m.st = state{}
	if x := m.extra(); x != nil {
		if x.err != nil {
			x.err = nil
		}
		if x.batcher != "" {
			x.batcher = ""
		}
		if x.batchKey != "" {
			x.batchKey = ""
		}
	}
}

// SetAckData attaches the source's per-message ack data (for example a broker
// message id), handed back in acker.Outcome.Data.
func (m *Message[T]) SetAckData(data any) {
	if x := m.extra(); x != nil {
		x.ackData = data
		return
	}
	m.aux = data
}

// Acknowledger returns the acknowledger the message's outcome goes to and the
// per-message id and data it will be given.
func (m *Message[T]) Acknowledger() (ack acker.Acknowledger, id uint64, data any) {
	a := m.ack
	if a == nil {
		a = acker.Discard
	}
	return a, m.id, m.ackData()
}

// Batcher returns the name of the batcher the message goes to after its
// processor; DefaultBatcher unless SetBatcher changed it.
func (m *Message[T]) Batcher() string {
	if x := m.extra(); x != nil && x.batcher != "" {
		return x.batcher
	}
	return DefaultBatcher
}

// SetBatcher routes the message to the batcher called name.
func (m *Message[T]) SetBatcher(name string) {
	if x := m.extra(); x != nil {
		x.batcher = name
	} else if name != "" && name != DefaultBatcher {
		m.ensureExtra().batcher = name
	}
}

// BatchKey returns the key that groups messages into batches within a
// batcher; "" by default.
func (m *Message[T]) BatchKey() string {
	if x := m.extra(); x != nil {
		return x.batchKey
	}
	return ""
}

// SetBatchKey sets the batch key. Messages with different keys never share a
// batch.
func (m *Message[T]) SetBatchKey(key string) {
	if x := m.extra(); x != nil {
		x.batchKey = key
	} else if key != "" {
		m.ensureExtra().batchKey = key
	}
}

// BatchMode returns the message's batch mode (Bulk by default).
func (m *Message[T]) BatchMode() BatchMode { return m.st.mode }

// SetBatchMode sets the batch mode. A value other than Bulk and Flush sets
// Bulk, as an empty name given to SetBatcher routes to DefaultBatcher.
func (m *Message[T]) SetBatchMode(mode BatchMode) {
	if mode > Flush {
		mode = Bulk
	}
	m.st.mode = mode
}

// Status reports whether the message has failed.
func (m *Message[T]) Status() Status { return m.st.status }

// Failed reports whether the message has failed.
func (m *Message[T]) Failed() bool { return m.st.status == StatusFailed }

// Err returns why the message failed, or nil.
func (m *Message[T]) Err() error {
	if x := m.extra(); x != nil {
		return x.err
	}
	return nil
}

// Fail marks the message as failed because of err (ErrFailed when err is
// nil). A failed message is not handed to later stages; its acknowledger
// receives it among the failed outcomes. Failing an already failed message
// replaces the error; on an interrupted message (see Interrupted) the new
// error is wrapped in an *acker.ShutdownError, since the shutdown still
// caused the failure.
func (m *Message[T]) Fail(err error) {
	if err == nil {
		err = ErrFailed
	}
	if m.st.interrupted {
		err = acker.WrapShutdown(err)
	}
	m.st.status = StatusFailed
	m.ensureExtra().err = err
}

// Disposition returns how the message is acknowledged if it fails:
// acker.DispositionRetry for an interrupted message (see Interrupted),
// whatever SetDisposition set.
func (m *Message[T]) Disposition() acker.Disposition {
	if m.st.interrupted {
		return acker.DispositionRetry
	}
	return m.st.disposition
}

// MarkInterrupted marks m as interrupted by the pipeline's shutdown when it
// failed with an error acker.CausedByShutdown accepts for ctx, the context
// its handler was given, and reports whether m is interrupted. The stages
// call it on every failed message before the failure hook runs. An
// interrupted message's error wraps acker.ErrShutdown (and the handler's
// error) and its outcome carries acker.DispositionRetry whatever a hook
// does later: it was not handled, so its source must deliver it again.
// It has no error to return: a nil ctx panics when m failed with an error.
func (m *Message[T]) MarkInterrupted(ctx context.Context) bool {
	if m.st.interrupted {
		return true
	}
	if m.st.status != StatusFailed || !acker.CausedByShutdown(ctx, m.Err()) {
		return false
	}
	m.st.interrupted = true
	x := m.ensureExtra()
	x.err = acker.WrapShutdown(x.err)
	return true
}

// Interrupted reports whether m failed because the pipeline's shutdown
// interrupted its handling (see MarkInterrupted).
func (m *Message[T]) Interrupted() bool { return m.st.interrupted }

// SetDisposition changes how the message is acknowledged if it fails, for
// example from a failure hook: acker.DispositionDiscard to get past a poison
// message, acker.DispositionRetry to have it delivered again. What each
// disposition does is documented by the source. A value other than
// acker's DispositionDefault, DispositionRetry and DispositionDiscard sets
// DispositionDefault: the message's acknowledger receives that, and its
// source applies its documented failure policy, as it does for a message
// whose disposition was never set.
func (m *Message[T]) SetDisposition(d acker.Disposition) {
	if d > acker.DispositionDiscard {
		d = acker.DispositionDefault
	}
	m.st.disposition = d
}

// Outcome returns what the message's acknowledger learns about it.
func (m *Message[T]) Outcome() acker.Outcome {
	o := acker.Outcome{ID: m.id, Data: m.ackData(), Message: m}
	if m.st.status == StatusFailed {
		o.Err = m.Err()
		o.Disposition = m.Disposition()
	}
	return o
}

// PartitionKey returns the ordering key the source gave the message with
// SetPartitionKey; "" when it gave none.
func (m *Message[T]) PartitionKey() string {
	if x := m.extra(); x != nil {
		return x.partKey
	}
	return ""
}

// SetPartitionKey records the source's ordering key: the Kafka source, for
// example, gives every message of a partition the same key. When the source
// asks for ordering (producer.Info.Ordered) and the processors have no
// PartitionBy, a pipeline routes messages by this key, so that messages with
// the same key are handled by one processor in the order they were fetched.
// Sources should reuse one string per key rather than build one per message.
// The key needs the message's extra fields, allocated on first use: a source
// that does not reuse its messages can make them with Slab.NewKeyed instead,
// which allocates those in blocks.
func (m *Message[T]) SetPartitionKey(key string) {
	if x := m.extra(); x != nil {
		x.partKey = key
	} else if key != "" {
		m.ensureExtra().partKey = key
	}
}

// Defer takes the message's outcome out of the pipeline's hands: the stage
// that would report it to the acknowledger (a processor without batchers, or
// a batch processor) skips it. Whoever deferred it must report the outcome
// exactly once, to the acknowledger Acknowledger returns, typically when a
// downstream system has resolved it (a tracked topic publish, say). Defer is
// meant for the last stage to handle the message; a deferred message that
// still goes on to a batcher is batched as usual but not acknowledged there.
//
// Call Defer before handing the message on: its outcome may then be
// reported while the pipeline still holds the message (a tracked publish
// can resolve before the handler returns). A source that reuses its
// messages must therefore not reuse one whose Deferred reports true when
// its outcome arrives; the Kafka sources leave such a message to the
// garbage collector.
func (m *Message[T]) Defer() { m.st.deferred = true }

// Undefer cancels Defer, for a deferrer whose hand-off failed before
// anything could report the outcome: the pipeline reports it again.
func (m *Message[T]) Undefer() { m.st.deferred = false }

// Deferred reports whether Defer was called.
func (m *Message[T]) Deferred() bool { return m.st.deferred }

// AckImmediately asks for m's outcome to be reported before its batch is
// handled (Broadway's ack_immediately), for at-most-once delivery or for
// long batch work that must not hold up the source. Call it from a
// processor's Handle or Prepare. The processor reports the outcome as soon
// as the handlers of m's chunk have returned, in the chunk's acknowledgement
// (one call per acknowledger, like every other), before it hands m to its
// batcher: successful then, unless m fails in that processor. m then goes on
// to its batcher as a copy that no longer belongs to its source: it carries
// the payload, routing and partition key but no Metadata (the source may
// reuse it), and whatever becomes of it in the batch stage, its outcome is
// not reported again: a drain cut short drops it if its batch was not
// handled, and the stages count it as dropped, not as unhandled. In a
// pipeline without batchers, and on a deferred message (see
// Defer), it changes nothing.
func (m *Message[T]) AckImmediately() { m.st.ackNow = true }

// AckImmediately calls AckImmediately on every message of msgs, skipping
// the nil ones.
func AckImmediately[T any](msgs ...*Message[T]) {
	for _, m := range msgs {
		if m != nil {
			m.AckImmediately()
		}
	}
}

// AckRequested reports whether AckImmediately was called on m.
func (m *Message[T]) AckRequested() bool { return m.st.ackNow }

// Acknowledged reports whether m's outcome was already reported by the
// processor that handled it (see AckImmediately): a batch stage does not
// report it again.
func (m *Message[T]) Acknowledged() bool { return m.st.acked }

// Detach makes dst a copy of src carrying data as its payload, its routing,
// status and partition key, but nothing else of its source: no
// acknowledger, ack data or Metadata. dst is marked Acknowledged, so that
// AddTo skips it. Processors use it for a message acknowledged immediately that
// goes on to a batcher, since its source may reuse src once its outcome
// is reported. With a nil dst or src it does nothing.
func Detach[In, Out any](dst *Message[Out], src *Message[In], data Out) {
	if dst == nil || src == nil {
		return
	}
	dst.Init(data, nil, src.id)
	dst.st = src.st
	dst.st.acked = true
	if x := src.extra(); x != nil {
		dst.aux = &extra{err: x.err, partKey: x.partKey, batcher: x.batcher, batchKey: x.batchKey}
	}
}

// AddTo adds the message's outcome to g, for the acknowledger the message
// carries, unless the message was deferred or already acknowledged (see
// AckImmediately). Stages use it to report outcomes.
func (m *Message[T]) AddTo(g *acker.Group) {
	if m.st.deferred || m.st.acked {
		return
	}
	// Filled in place, as Outcome would build it.
	failed := m.st.status == StatusFailed
	var err error
	if failed {
		err = m.Err()
	}
	o := g.Slot(m.ack, err != nil)
	o.ID, o.Data, o.Message = m.id, m.ackData(), m
	if failed {
		o.Err, o.Disposition = err, m.Disposition()
	}
}

// String describes the message for logs without its payload.
func (m *Message[T]) String() string {
	s := fmt.Sprintf("message{id=%d batcher=%q key=%q mode=%s status=%s", m.id, m.Batcher(), m.BatchKey(), m.st.mode, m.st.status)
	if err := m.Err(); err != nil {
		s += fmt.Sprintf(" err=%q", err.Error())
	}
	return s + "}"
}

// LogValue describes the message for log/slog without its payload: its
// id; its batcher and batch key, when a processor set them; its status and
// error; and, as "source", what its Metadata says of where it came from
// when the Metadata describes itself for logs (implements slog.LogValuer,
// as the sources' do: a Kafka record's topic, partition and offset, a
// Pulsar message's topic, id and key, a topology letter's key and
// retries), so that a failure's log line locates the message.
func (m *Message[T]) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.Uint64("id", m.id))
	if x := m.extra(); x != nil {
		if x.batcher != "" {
			attrs = append(attrs, slog.String("batcher", x.batcher))
		}
		if x.batchKey != "" {
			attrs = append(attrs, slog.String("batch_key", x.batchKey))
		}
	}
	attrs = append(attrs, slog.String("status", m.st.status.String()))
	if err := m.Err(); err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	if lv, ok := m.Metadata.(slog.LogValuer); ok {
		// Resolved here: a handler resolves the values of top-level
		// attributes, not those within a group.
		attrs = append(attrs, slog.Attr{Key: "source", Value: slog.AnyValue(lv).Resolve()})
	}
	return slog.GroupValue(attrs...)
}

// Keyed is what every *Message[T] offers whatever its payload type T: its
// source's partition key and metadata, and its routing. A partition
// function for a whole pipeline (pipeline.Options.PartitionBy) sees
// messages through it, since processors and batchers may carry different
// payload types.
type Keyed interface {
	// PartitionKey is the source's ordering key (see SetPartitionKey).
	PartitionKey() string
	// BatchKey is the batch key, "" until a processor sets one.
	BatchKey() string
	// Batcher is the batcher the message is routed to.
	Batcher() string
	// SourceMetadata is the message's Metadata field.
	SourceMetadata() any
}

// SourceMetadata returns m.Metadata, so that code that sees m as a Keyed
// can read it.
func (m *Message[T]) SourceMetadata() any { return m.Metadata }

// MetadataAs returns the message's metadata as an M, and whether it is one
// (the zero M and false for a nil m).
func MetadataAs[M, T any](m *Message[T]) (M, bool) {
	if m == nil {
		var zero M
		return zero, false
	}
	md, ok := m.Metadata.(M)
	return md, ok
}

// Transfer makes dst carry src's metadata, acknowledger, routing and status
// with data as its payload. Processors use it when their handler turns an In
// payload into an Out payload. dst takes over src: the two share the rarely
// set fields (error, routing, partition key) from then on, so only dst
// may be changed until its outcome is reported. With a nil dst or src it
// does nothing.
func Transfer[In, Out any](dst *Message[Out], src *Message[In], data Out) {
	if dst == nil || src == nil {
		return
	}
	dst.Data = data
	dst.Metadata = src.Metadata
	dst.ack = src.ack
	dst.id = src.id
	dst.aux = src.aux
	dst.st = src.st
}
