package pulsartopology

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/pulsarresub"
	"github.com/boulevard-go/boulevard/message"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/internal/reachrelay"
)

// ErrCatchUp is returned by a dead-letter reader's TryReceive when its
// marker did not come back within Options.OperationTimeout, or before
// the TryReceive's context ended (it then wraps the context's error).
var ErrCatchUp = errors.New("pulsartopology: the reader did not catch up with the DLQ")

// ErrConsumerClosed is wrapped, with the client's cause, by the error a
// reader's Receive and TryReceive return once pulsar-client-go closed
// its consumer by itself: it gave up reconnecting, or the broker refused
// the consumer for good (a deleted topic or subscription, a revoked
// authorization), or the application closed the client the backend uses.
// The reader receives nothing more; a topology source's run fails, and
// the stage's next run subscribes a new reader.
var ErrConsumerClosed = errors.New("pulsartopology: the client closed the reader's consumer")

const (
	// markerNackDelay is how soon a marker another reader received comes
	// back to the subscription.
	markerNackDelay = 100 * time.Millisecond
	// markerLife is how long a marker is passed on between readers before
	// it is dropped (its reader is gone).
	markerLife = time.Minute
	// channelSize is the channel between pulsar-client-go's consumer and
	// Receive.
	channelSize = 64
)

// reader is one pulsar-client-go consumer. Receive delivers the letters
// meant for its group; Settle acknowledges them.
type reader[T any] struct {
	b     *Backend[T]
	cons  pulsar.Consumer
	ch    chan pulsar.ConsumerMessage
	group string // the group whose targeted messages it delivers
	dlq   string // a dead-letter reader's DLQ: where its markers go
	sub   string // the subscription's name
	// life ends when the reader closes (end, called by shut): it cuts
	// short a TryReceive's marker send; stop is its Done channel.
	life    context.Context
	end     context.CancelFunc
	stop    <-chan struct{}
	closing liveset.Closing // closes the consumer

	// only the receiving goroutine uses these
	marker   string // the marker TryReceive waits for
	markerAt time.Time
	// pinned is set by PinEnd: marker is then the pinned end's, and
	// once it has come back (atEnd) the reader delivers nothing more.
	pinned bool
	atEnd  bool
	// decoding is the message the codec decodes, nil between messages,
	// and decodingAt the letters taken before it in the same call: a
	// Goexit of the codec ends the receiving goroutine while it is set.
	decoding   pulsar.Message
	decodingAt int
	// undecodable counts the messages the reader acknowledged and skipped
	// because they do not decode.
	undecodable atomic.Uint64
	// undecodableLines holds back, per topic partition, the lines of
	// messages that do not decode that follow the last one logged by less
	// than logburst.Interval.
	undecodableLines logburst.Keyed[string]
	// resubscribes logs the resubscriptions of a broadcast reader (nil
	// for another reader).
	resubscribes *pulsarresub.Listener
	// reach keeps what the watch of the consumer's reconnections reports
	// (spulsar.WatchConsumer) for the observer the subscriber sets
	// (ReportReach); unwatch ends that watch.
	reach   *reachrelay.Relay
	unwatch func()
	// gone reports the consumer's closure (nil for a reader made without
	// a watch); lostOnce logs, once, a closure the reader did not ask for
	// (lost).
	gone     *spulsar.CloseWatch
	lostOnce sync.Once
}

var _ topology.UndecodableCounter = (*reader[int])(nil)

var _ topology.ResubscribeCounter = (*reader[int])(nil)

var _ topology.ReachReporter = (*reader[int])(nil)

// ReportReach implements topology.ReachReporter: o hears when the
// reader's consumer cannot reconnect to a broker and when it has
// reconnected (see Queues.Subscribe).
func (r *reader[T]) ReportReach(o topic.ReachObserver) { r.reach.Set(o) }

// Resubscribes implements topology.ResubscribeCounter: the times a
// broadcast reader's consumer subscribed again after losing its
// connection, once per topic partition; 0 for a group or dead-letter
// reader, whose durable subscription keeps its position.
func (r *reader[T]) Resubscribes() uint64 {
	if r.resubscribes == nil {
		return 0
	}
	return r.resubscribes.Count()
}

// Undecodable implements topology.UndecodableCounter: the messages the
// reader acknowledged and skipped because they do not decode; those for
// another group, and markers, are not counted. Each is counted; per topic
// partition, the first is logged at WARN with its id and error, and the
// like ones within logburst.Interval of the last line are counted in the
// partition's next line (held_back, with the ids of the first and the last
// held back), or in one logged as the reader closes.
func (r *reader[T]) Undecodable() uint64 { return r.undecodable.Load() }

func newReader[T any](b *Backend[T], co pulsar.ConsumerOptions, group, dlq string) (*reader[T], error) {
	ch := make(chan pulsar.ConsumerMessage, channelSize)
	co.MessageChannel = ch
	if n := uint(b.opts.MaxReconnectToBroker); n > 0 { // 0: the client's nil, for ever
		co.MaxReconnectToBroker = &n
	}
	reach := new(reachrelay.Relay)
	gone := spulsar.NewCloseWatch()
	co.Interceptors = append(slices.Clip(co.Interceptors), gone)
	unwatch := spulsar.WatchConsumer(b.client, &co, reach)
	c, err := b.client.Subscribe(co)
	if err != nil {
		unwatch()
		if b.isClosed() {
			return nil, topology.ErrClosed
		}
		return nil, fmt.Errorf("%w: subscription %q: %w", ErrSubscribe, co.SubscriptionName, b.redact(err))
	}
	r := readerOn(b, c, ch, group, dlq, co.SubscriptionName)
	r.resubscribes, _ = co.EventListener.(*pulsarresub.Listener)
	r.reach, r.unwatch, r.gone = reach, unwatch, gone
	if !b.track(r) {
		c.Close()
		unwatch()
		return nil, topology.ErrClosed
	}
	return r, nil
}

// readerOn returns the reader of consumer c of subscription sub, whose
// messages come on ch, with no watch of its reconnections.
func readerOn[T any](b *Backend[T], c pulsar.Consumer, ch chan pulsar.ConsumerMessage, group, dlq, sub string) *reader[T] {
	life, end := context.WithCancel(context.Background())
	return &reader[T]{b: b, cons: c, ch: ch, group: group, dlq: dlq, sub: sub, life: life, end: end, stop: life.Done(),
		reach: new(reachrelay.Relay), unwatch: func() {},
		undecodableLines: logburst.Keyed[string]{Log: b.log, Level: slog.LevelWarn,
			Msg: "pulsartopology: a message does not decode; acknowledged and skipped"}}
}

// Receive implements topology.Reader.
// A nil ctx returns topology.ErrNilContext, nothing consumed.
func (r *reader[T]) Receive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if ctx == nil {
		return 0, topology.ErrNilContext
	}
	if len(dst) == 0 {
		return 0, topology.ErrEmptyDst
	}
	returned := false
	defer r.exited(dst, &returned)
	n := 0
	for n == 0 {
		// A closed reader refuses whatever is ready, as TryReceive does:
		// the select below picks at random among its ready cases.
		select {
		case <-r.stop:
			return 0, topology.ErrClosed
		default:
		}
		if r.atEnd {
			// A dead-letter reader's pinned end came back: nothing
			// after it is delivered.
			select {
			case <-r.stop:
				return 0, topology.ErrClosed
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		if err := r.lost(); err != nil {
			return 0, err
		}
		select {
		case cm := <-r.ch:
			n = r.take(cm, dst, n)
		case <-r.goneDone():
			continue // lost, or closed by Close meanwhile
		case <-r.stop:
			return 0, topology.ErrClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		n = r.drain(dst, n)
	}
	returned = true
	return n, nil
}

// goneDone is closed once the reader's consumer has closed; nil (never
// ready) for a reader made without a watch.
func (r *reader[T]) goneDone() <-chan struct{} {
	if r.gone == nil {
		return nil
	}
	return r.gone.Done()
}

// lost returns nil while the consumer is open, or was closed by the
// reader's Close (or the backend's). Otherwise the client closed it by
// itself (it gave up reconnecting, or the broker refused it for good: a
// deleted topic or subscription, a revoked authorization), or the
// application closed the client under the backend: nothing will be
// delivered through it again, and what it delivered can no longer be
// acknowledged. lost then logs one ERROR line, the first time, and
// returns an error wrapping ErrConsumerClosed and the client's cause
// (spulsar.ErrClosedByCall when it gave none). The messages it holds
// are not handed out: the broker delivers them again to the group.
func (r *reader[T]) lost() error {
	if r.gone == nil {
		return nil
	}
	cause := r.gone.Err()
	if cause == nil || r.life.Err() != nil {
		return nil
	}
	err := fmt.Errorf("%w: subscription %q: %w", ErrConsumerClosed, r.sub, r.b.redact(cause))
	r.lostOnce.Do(func() {
		r.b.log.Error("pulsartopology: the client closed the reader's consumer; Receive fails",
			slog.String("subscription", r.sub), slog.Any("error", err))
	})
	return err
}

// drain takes what is ready without waiting.
func (r *reader[T]) drain(dst []topology.Letter[T], n int) int {
	for n < len(dst) && !r.atEnd {
		select {
		case cm := <-r.ch:
			n = r.take(cm, dst, n)
		default:
			return n
		}
	}
	return n
}

// TryReceive implements topology.Reader. A reader of the main topic
// returns what its consumer holds already, and ignores ctx. A dead-letter
// reader, which cannot tell that nothing is left without asking, catches
// up with the DLQ when it has nothing to return: it publishes a marker to
// the DLQ and receives until the marker comes back, returning what arrives
// before it, or 0 once it is back. Another reader of the subscription that
// receives the marker hands it back to the subscription. The marker's send
// waits for the broker's receipt up to Options.OperationTimeout or ctx's
// deadline, whichever ends first (an error wrapping ErrSend and the
// context's error); waiting for the marker to come back is bounded by
// Options.OperationTimeout (ErrCatchUp) and by ctx (ErrCatchUp wrapping
// ctx.Err(); a later call goes on waiting for the same marker, and sends
// a new one once the first was sent a minute ago or more, when another
// reader has dropped it). Both end
// when the reader is closed: TryReceive then returns ErrClosed. The wait
// for the marker also ends as soon as the client closes the consumer by
// itself: TryReceive then returns lost's error (ErrConsumerClosed).
// A nil ctx returns topology.ErrNilContext, nothing consumed.
func (r *reader[T]) TryReceive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	if ctx == nil {
		return 0, topology.ErrNilContext
	}
	if len(dst) == 0 {
		return 0, topology.ErrEmptyDst
	}
	returned := false
	defer r.exited(dst, &returned)
	n, err := r.tryReceive(ctx, dst)
	returned = true
	return n, err
}

func (r *reader[T]) tryReceive(ctx context.Context, dst []topology.Letter[T]) (int, error) {
	select {
	case <-r.stop:
		return 0, topology.ErrClosed
	default:
	}
	if err := r.lost(); err != nil {
		return 0, err
	}
	n := r.drain(dst, 0)
	if n > 0 || r.dlq == "" || r.atEnd {
		return n, nil
	}
	if r.marker != "" && !r.pinned && time.Since(r.markerAt) >= markerLife {
		// Every other reader of the subscription drops it by now, and one
		// whose clock is markerLife or more from the one that stamped it
		// dropped it at once: it does not come back, so a new one goes.
		r.marker = ""
	}
	if r.marker == "" {
		if err := r.sendMarker(ctx); err != nil {
			return 0, err
		}
	}
	deadline := time.NewTimer(r.b.opts.OperationTimeout)
	defer deadline.Stop()
	for r.marker != "" {
		select {
		case cm := <-r.ch:
			n = r.drain(dst, r.take(cm, dst, 0))
			if n > 0 || r.atEnd {
				return n, nil
			}
		case <-r.stop:
			return 0, topology.ErrClosed
		case <-r.goneDone():
			// The marker cannot come back through a closed consumer.
			if err := r.lost(); err != nil {
				return 0, err
			}
			return 0, topology.ErrClosed
		case <-deadline.C:
			return 0, fmt.Errorf("%w: topic %q, within %s", ErrCatchUp, r.dlq, r.b.opts.OperationTimeout)
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: topic %q: %w", ErrCatchUp, r.dlq, ctx.Err())
		}
	}
	return 0, nil
}

// sendMarker publishes a new marker to the DLQ, for the reader to wait
// for, bounded by ctx and Options.OperationTimeout; ErrClosed once the
// reader closes.
func (r *reader[T]) sendMarker(ctx context.Context) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tok := hex.EncodeToString(rnd[:])
	now := time.Now()
	sctx, cancel := context.WithTimeout(ctx, r.b.opts.OperationTimeout)
	unhook := context.AfterFunc(r.life, cancel)
	err := r.b.sendWithin(sctx, r.dlq, &pulsar.ProducerMessage{
		Payload:    []byte{},
		Properties: map[string]string{PropMarker: tok + "@" + strconv.FormatInt(now.UnixMilli(), 10)},
	})
	unhook()
	cancel()
	if err != nil {
		if r.life.Err() != nil {
			return topology.ErrClosed
		}
		return err
	}
	r.marker, r.markerAt = tok, now
	return nil
}

// deadReader is a dead-letter reader, which can pin its end.
type deadReader[T any] struct{ *reader[T] }

var _ topology.EndPinner = deadReader[int]{}

// PinEnd implements topology.EndPinner: it publishes a marker to the DLQ,
// as TryReceive does to catch up, bounded by ctx and
// Options.OperationTimeout (an error wrapping ErrSend and the context's
// error), and the reader delivers nothing that comes after it: once the
// marker has come back TryReceive returns 0, nil, and what follows it
// stays unacknowledged, for the subscription's next reader (Receive then
// waits for ctx or Close). The DLQ's order is its topic's: on a
// partitioned DLQ the marker bounds only its own partition.
func (r deadReader[T]) PinEnd(ctx context.Context) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	select {
	case <-r.stop:
		return topology.ErrClosed
	default:
	}
	if r.pinned {
		return nil
	}
	if err := r.sendMarker(ctx); err != nil {
		return err
	}
	r.pinned = true
	return nil
}

// take decodes cm into dst[n] when it is a letter for this reader and
// returns the new count; anything else is acknowledged and skipped (a
// foreign marker still young is handed back).
func (r *reader[T]) take(cm pulsar.ConsumerMessage, dst []topology.Letter[T], n int) int {
	props := cm.Properties()
	if m, ok := props[PropMarker]; ok {
		r.marked(cm, m)
		return n
	}
	r.decoding, r.decodingAt = cm.Message, n
	l, group, err := decodeLetter(r.b.opts.Codec, props, cm.Payload())
	r.decoding = nil
	if err != nil {
		r.undecodable.Add(1)
		r.logUndecodable(cm.Message, err)
		r.ack(cm)
		return n
	}
	if group != "" && group != r.group {
		r.ack(cm)
		return n
	}
	l.Key = cm.Key()
	l.Receipt = &receipt{id: cm.ID()}
	dst[n] = l
	return n + 1
}

// exited is deferred by Receive and TryReceive, which set *returned when
// they return. When the codec ended their goroutine instead (runtime.Goexit,
// as t.FailNow does), the message it was decoding counts as one that does
// not decode (logged with the stack of the exit, unless its line is held
// back in a burst, and acknowledged),
// and the letters taken before it in that call, which no caller gets now,
// are nacked, so that the broker delivers them again. It does nothing
// when the goroutine ends for another reason (a panic goes on).
func (r *reader[T]) exited(dst []topology.Letter[T], returned *bool) {
	m := r.decoding
	if *returned || m == nil {
		return
	}
	r.decoding = nil
	r.undecodable.Add(1)
	taken := dst[:r.decodingAt]
	r.logUndecodable(m, message.ErrHandlerExited, slog.Int("nacked", len(taken)), slog.String("stack", string(debug.Stack())))
	r.ack(m)
	for i := range taken {
		if rc, ok := taken[i].Receipt.(*receipt); ok && !r.b.crashed.Load() {
			r.cons.NackID(rc.id)
		}
		taken[i] = topology.Letter[T]{}
	}
}

// logUndecodable logs the line of m, which does not decode with err: its
// topic (the partition's), its id, the error and attrs; a line that
// follows the last of its partition by less than logburst.Interval is
// only counted, with its id.
func (r *reader[T]) logUndecodable(m pulsar.Message, err error, attrs ...slog.Attr) {
	id := m.ID().String()
	r.undecodableLines.Line(context.Background(), m.Topic(), []slog.Attr{slog.String("topic", m.Topic())}, slog.StringValue(id),
		append([]slog.Attr{slog.String("message_id", id), slog.Any("error", err)}, attrs...)...)
}

// decodeLetter decodes a message's properties and payload into a letter
// (its key and receipt left for the caller), and returns the group the
// message is for ("" for every group).
func decodeLetter[T any](codec topic.Codec[T], props map[string]string, payload []byte) (topology.Letter[T], string, error) {
	var l topology.Letter[T]
	group, err := readProperties(props, &l)
	if err == nil {
		l.Value, err = topic.Decode(codec, payload)
	}
	return l, group, err
}

// marked handles a marker: this reader's own ends its catch-up; another
// reader's goes back to the subscription while it is young (markerYoung).
func (r *reader[T]) marked(cm pulsar.ConsumerMessage, m string) {
	tok, at, _ := strings.Cut(m, "@")
	if r.marker != "" && tok == r.marker {
		r.marker = ""
		r.atEnd = r.pinned
		r.ack(cm)
		return
	}
	if markerYoung(at, time.Now()) {
		r.cons.NackID(cm.ID())
		return
	}
	r.ack(cm)
}

// markerYoung reports whether a marker stamped at (Unix milliseconds, as
// its reader writes it) is less than markerLife away from now, in either
// direction: one from a clock ahead of now by less than that is young, one
// stamped further ahead, or not stamped as a reader stamps, is not, so
// that no marker goes back to the subscription forever.
func markerYoung(at string, now time.Time) bool {
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.UnixMilli(ms))
	return age > -markerLife && age < markerLife
}

// ack acknowledges m, a message the reader skips (a marker, a letter for
// another group, one that does not decode); a failure is logged with the
// message's topic and id (the broker delivers it again, to be skipped
// again), and its error redacted as the backend's errors are.
func (r *reader[T]) ack(m pulsar.Message) {
	if r.b.crashed.Load() {
		return
	}
	if err := r.cons.AckID(m.ID()); err != nil {
		r.b.log.Warn("pulsartopology: acknowledging a skipped message failed",
			slog.String("topic", m.Topic()), slog.String("message_id", m.ID().String()), slog.Any("error", r.b.redact(err)))
	}
}

// ErrNotSettled is returned by Settle for a letter whose hand-off (hold,
// requeue or dead-lettering) failed: it is negatively acknowledged, and
// the broker delivers it to the group again after
// Options.RedeliveryDelay.
var ErrNotSettled = errors.New("pulsartopology: not acknowledged, its hand-off failed; it will be delivered again")

// receipt is a letter's handle on its message.
type receipt struct {
	id   pulsar.MessageID
	kept atomic.Bool // its hand-off failed: never acknowledge it
}

// Settle implements topology.Reader: it acknowledges the letter's message
// on its subscription; a letter whose hand-off failed is negatively
// acknowledged instead (ErrNotSettled). The client sends acknowledgements
// in groups and does not wait for the broker's answer: nil means the
// acknowledgement is on its way, and one the connection loses (sent
// while the consumer reconnects, or just before its connection dropped)
// lets the broker deliver the letter to the group again (at least once).
// A nil letter, or one without a receipt of this backend, settles nothing:
// nil.
func (r *reader[T]) Settle(_ context.Context, l *topology.Letter[T]) error {
	if l == nil {
		return nil
	}
	rc, ok := l.Receipt.(*receipt)
	if !ok {
		return nil
	}
	if r.b.crashed.Load() {
		return topology.ErrClosed
	}
	if rc.kept.Load() {
		r.cons.NackID(rc.id)
		return ErrNotSettled
	}
	if err := r.cons.AckID(rc.id); err != nil {
		return fmt.Errorf("pulsartopology: acknowledging: %w", r.b.redact(err))
	}
	return nil
}

// Close implements topology.Reader: the consumer leaves its subscription,
// and the broker delivers what it received without settling to the group
// again. It returns nil once the consumer is closed. pulsar-client-go's
// Consumer.Close takes no context: it waits for the broker's answer to its
// close request (on each topic the consumer reads, at once) for at most
// the client's operation timeout (pulsar.ClientOptions.OperationTimeout).
// If ctx ends first, Close returns an error wrapping ctx.Err() and the
// consumer's closing goes on in the background, within that bound; the
// backend's Close waits for it. Idempotent: a later call waits, within its
// own ctx, for the same closing.
// A nil ctx returns topology.ErrNilContext and leaves the reader open:
// call Close again with a context.
func (r *reader[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	return await(ctx, r.shut(), "a reader of subscription "+strconv.Quote(r.sub))
}

// shut ends the reader's receiving (and a marker's send) at once and
// starts the consumer's closing (once); the channel it returns is closed
// when it is done.
func (r *reader[T]) shut() <-chan struct{} {
	r.end()
	return r.closing.Start(func() {
		r.cons.Close()
		r.unwatch()
		r.undecodableLines.Flush(context.Background())
		if r.resubscribes != nil {
			r.resubscribes.Flush(context.Background())
		}
		r.b.untrack(r)
	})
}
