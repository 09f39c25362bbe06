// Package sink publishes a pipeline's processed messages (or batches) into
// an internal topic, and with ack propagation carries the downstream outcome
// back to the messages' own sources.
//
// A Sink is made from a pipeline's topic binding (topic.Binding, usually
// from a topic.TopicSet built by package topic/config). Its behaviour
// follows the binding's ack_propagation mode:
//
//   - disabled: each message is published untracked with the binding's
//     queue_on_full, and the pipeline acknowledges it as usual once the
//     handler returns: the upstream message is settled when it is handed to
//     the topic. A message dropped by queue_on_full drop_newest counts as
//     handed over (Stats.Dropped counts it).
//   - auto: each message is published through a topic.TrackedPublisher and
//     deferred (message.Message.Defer), so the pipeline does not acknowledge
//     it; when the tracked publish resolves, the sink reports the outcome
//     to the message's acknowledger itself: acked when the downstream
//     subscribers acked, failed with an *OutcomeError when they nacked
//     (carrying their reason), when it timed out, or when the topic or the
//     publisher closed first. A publish that cannot happen at all (the
//     context ends, the topic is closed, or drop_newest found a full queue)
//     is an error returned to the handler, which fails the message in the
//     pipeline as usual.
//
// A downstream nack reason is the downstream subscriber's own error, which
// the sink matches (errors.Is) to choose the upstream disposition, and
// formats once (Error) before handing it on, since the upstream
// acknowledger may format it: when its Is, Unwrap or Error method panics,
// the sink logs the panic once, at error level, and still reports the
// message upstream, once, failed with the default disposition; the
// *OutcomeError's Result.Reason is then the *message.PanicError in place
// of the reason. The reason is checked on the failure path only: an acked
// publish costs nothing more.
//
// Outcomes are reported by callback from the goroutine that settles the
// publish (the downstream subscriber's acknowledgement, or the publisher's
// timeout goroutine): no goroutine is started per message, and the
// bookkeeping of a publish is recycled, so a warm sink does not allocate per
// message beyond what the topic needs. Outcomes of a batch published with
// PublishBatch are reported together, one Ack call per acknowledger, once
// the whole batch has resolved.
//
// # Shutting down
//
// A pipeline stops acknowledging deferred messages itself, so its sources
// must not be closed while the sink still waits for downstream outcomes.
// List the sink in the pipeline's Drainers (pipeline.Options.Drainers, a
// Sink is a pipeline.Drainer): once every stage has returned, the pipeline
// calls Drain, which waits (within the pipeline's shutdown timeout) until
// every tracked publish has resolved and been reported, then closes the
// sink's publisher, and only then closes the source. Stop the upstream pipeline before the downstream ones: a
// downstream pipeline that stops first closes its subscriptions, and the
// messages it had not acked resolve upstream as failed
// (topic.ErrDeliveryDropped).
//
// A message that was not handled because a pipeline shut down is never
// reported upstream as handled: it fails with acker.DispositionRetry, which
// asks its source to deliver it again instead of committing past it. That
// is the case when the downstream handler was interrupted by its
// pipeline's shutdown (the nack reason wraps acker.ErrShutdown), when the
// downstream subscription was closed before acking it
// (topic.ErrDeliveryDropped), and when the sink was closed before the
// downstream outcome arrived, as Drain does once the pipeline's shutdown
// timeout passes (OutcomeError.Shutdown; the error wraps acker.ErrShutdown).
//
// # Headers and trace context
//
// Options.Headers gives each published message its topic headers
// (topic.Headers), which the downstream topic source puts in the message's
// metadata (source.Metadata.Headers). Package observe/tracing provides one
// that injects the publishing handler's span as W3C trace context, so that
// the downstream pipeline's span for the message continues its trace:
//
//	s, err := sink.New(sink.Options[T]{Binding: b, Headers: tracing.SinkHeaders(topts)})
//
// Without Options.Headers, messages are published without headers and the
// sink pays nothing for them.
package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/cond"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// Sentinels wrapped by *OutcomeError, one per failed receipt outcome.
var (
	// ErrNacked: a downstream subscriber nacked the message (or the topic
	// nacked it for it: no subscriber, delivery dropped, lagged).
	ErrNacked = errors.New("sink: downstream nacked")
	// ErrTimedOut: no downstream outcome arrived within the timeout.
	ErrTimedOut = errors.New("sink: downstream outcome timed out")
	// ErrClosed: the topic or the sink's publisher was closed before the
	// downstream outcome arrived.
	ErrClosed = errors.New("sink: closed before the downstream outcome")
)

// ErrAlreadyDeferred is what a publish with ack propagation returns, having
// published nothing, for a message that is deferred already (published
// through another tracked sink, say): its outcome can be reported once
// only, so a message can follow one tracked publish, not several.
var ErrAlreadyDeferred = errors.New("sink: message already deferred")

// ErrNilMessage is what Publish and PublishValue return for a nil message,
// and what the error PublishBatch returns for a batch holding nil wraps:
// nothing is published for it.
var ErrNilMessage = errors.New("sink: nil message")

// errZeroSink is what a publish returns on a Sink New did not make (a zero
// value, declared with var): it wraps topic.ErrNotCreated.
var errZeroSink = fmt.Errorf("sink: zero Sink (make one with New): %w", topic.ErrNotCreated)

// OutcomeError is the error a deferred message fails with when its tracked
// publish did not resolve as acked. errors.Is matches its sentinel
// (ErrNacked, ErrTimedOut, ErrClosed) and the topic's reason (for a nack,
// the downstream subscriber's own error), and acker.ErrShutdown when
// Shutdown is set. A reason whose Is, Unwrap or Error method panicked
// when the sink matched or formatted it is replaced by the
// *message.PanicError of that panic.
type OutcomeError struct {
	// Topic is the topic the message was published into.
	Topic topic.Name
	// Result is the tracked publish's outcome.
	Result topic.Result
	// Shutdown is set when the sink itself was closed before the downstream
	// outcome arrived (Drain closes it when the pipeline's shutdown
	// timeout cuts the wait short): the message was not handled downstream,
	// and the error wraps acker.ErrShutdown.
	Shutdown bool
}

// Error describes the outcome, for example
// "topic audit: downstream nacked: bad record".
func (e *OutcomeError) Error() string {
	s := "topic " + string(e.Topic) + ": "
	if e.Shutdown {
		s = acker.ErrShutdown.Error() + ": " + s
	}
	switch e.Result.Outcome {
	case topic.Nacked:
		s += "downstream nacked"
	case topic.TimedOut:
		s += "downstream outcome timed out"
	case topic.TopicClosed:
		s += "closed before the downstream outcome"
	default:
		s += e.Result.Outcome.String()
	}
	if e.Result.Reason != nil {
		s += ": " + e.Result.Reason.Error()
	}
	return s
}

// Unwrap returns the outcome's sentinel, the reason, and acker.ErrShutdown
// when Shutdown is set.
func (e *OutcomeError) Unwrap() []error {
	var sentinel error
	switch e.Result.Outcome {
	case topic.Nacked:
		sentinel = ErrNacked
	case topic.TimedOut:
		sentinel = ErrTimedOut
	case topic.TopicClosed:
		sentinel = ErrClosed
	}
	out := make([]error, 0, 3)
	if e.Shutdown {
		out = append(out, acker.ErrShutdown)
	}
	if sentinel != nil {
		out = append(out, sentinel)
	}
	if e.Result.Reason != nil {
		out = append(out, e.Result.Reason)
	}
	return out
}

// Options configure a Sink.
type Options[T any] struct {
	// Binding is the pipeline's binding of the topic: the topic handle, the
	// resolved queue_on_full and ack_propagation. Binding.Handle is
	// required.
	Binding topic.Binding[T] `name:"-"`
	// Logger receives publishing problems, and the events of the sink's
	// tracked publisher (topic.TrackedOptions.Logger). Nil means
	// slog.Default().
	Logger *slog.Logger `name:"-"`
	// Headers returns the headers a message is published with (nil: none),
	// for example its trace context (tracing.SinkHeaders). It is called
	// once per publish, on the publishing goroutine, with the publishing
	// call's context (a traced handler's context carries its span) and
	// the message published on behalf of, seen as a message.Keyed since
	// PublishValue's message may carry another payload type than the one
	// published. The sink hands the headers to the topic as they are: do
	// not change them afterwards. A panic in it is an error of that
	// publish, wrapping a *message.PanicError: the message is not
	// published nor deferred (PublishValue returns the error, PublishBatch
	// fails the message). Nil (the default) publishes every message
	// without headers.
	Headers func(ctx context.Context, m message.Keyed) topic.Headers `name:"-"`
}

// Stats are a sink's counters.
type Stats struct {
	// Published is the number of messages published.
	Published uint64
	// Dropped is the number of messages dropped by drop_newest (untracked).
	Dropped uint64
	// Acked is the number of deferred messages reported successful upstream.
	Acked uint64
	// Failed is the number of deferred messages reported failed upstream.
	Failed uint64
	// InFlight is the number of tracked publishes not yet reported.
	InFlight int
}

// Sink publishes messages into one topic. Create it with New; it is safe
// for concurrent use.
type Sink[T any] struct {
	b       topic.Binding[T]
	tracked *topic.TrackedPublisher[T]
	headers func(context.Context, message.Keyed) topic.Headers
	log     *slog.Logger
	// ctx is for upstream Ack calls; endAcks ends it when a Drain's
	// context ends first.
	ctx     context.Context
	endAcks context.CancelFunc
	pool    sync.Pool // *pending[T]

	published, dropped, acked, failed atomic.Uint64

	inFlight atomic.Int64
	mu       sync.Mutex
	idle     cond.Signal // broadcast when inFlight returns to 0
}

// WithDefaults returns o with every zero field replaced by its default.
// A sink has none to fill: a nil Logger means slog.Default() when used,
// and the binding carries its own resolved settings. New applies it.
func (o Options[T]) WithDefaults() Options[T] { return o }

// Validate reports every broken rule of o, with paths rooted at "sink"
// (for example "sink.binding.handle is required", or an on_full or
// ack_propagation.mode that is none of the topic's); nil when there is
// none. New calls it.
func (o Options[T]) Validate() error {
	var errs []error
	if o.Binding.Handle == nil {
		errs = append(errs, validate.Field("sink.binding.handle", "required", "is required"))
	}
	if f := o.Binding.OnFull; f != topic.Block && f != topic.DropNewest {
		errs = append(errs, validate.Field("sink.binding.on_full", "oneof",
			fmt.Sprintf("must be %s or %s, not %s", topic.Block, topic.DropNewest, f)))
	}
	if m := o.Binding.AckPropagation.Mode; m != topic.PropagationDisabled && m != topic.PropagationAuto {
		errs = append(errs, validate.Field("sink.binding.ack_propagation.mode", "oneof",
			fmt.Sprintf("must be %s or %s, not %s", topic.PropagationDisabled, topic.PropagationAuto, m)))
	}
	return validate.Join(errs...)
}

// New returns a sink for the binding. With ack propagation auto it creates
// the binding's tracked publisher (MaxInFlight, Timeout, OnFull from the
// binding, logging to Options.Logger); Close releases it.
func New[T any](opts Options[T]) (*Sink[T], error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := cmp.Or(opts.Logger, slog.Default())
	s := &Sink[T]{
		b:       opts.Binding,
		headers: opts.Headers,
		log:     log.With(slog.String("topic", string(opts.Binding.Handle.Name()))),
	}
	s.ctx, s.endAcks = context.WithCancel(context.Background())
	s.pool.New = func() any {
		p := &pending[T]{s: s}
		p.fn = p.done // bound once: publishing does not allocate a closure
		return p
	}
	if opts.Binding.AckPropagation.Mode == topic.PropagationAuto {
		to := opts.Binding.TrackedOptions()
		to.Logger = log // it names the topic itself
		tp, err := opts.Binding.Handle.Tracked(to)
		if err != nil {
			return nil, fmt.Errorf("sink: tracked publisher for %s: %w", opts.Binding.Handle.Name(), err)
		}
		s.tracked = tp
	}
	return s, nil
}

// Tracked reports whether the sink publishes tracked (ack propagation auto).
func (s *Sink[T]) Tracked() bool { return s.tracked != nil }

// Stats returns the sink's counters. Acked + Failed never exceeds
// Published, and none of the counters goes down between two readings.
func (s *Sink[T]) Stats() Stats {
	// The outcomes before the publishes: a tracked publish's outcome may
	// be reported (at once, when it reaches no subscriber) before the
	// publish returns and counts it, and a message with an outcome was
	// published, so Published is at least the outcomes read before it.
	st := Stats{Acked: s.acked.Load(), Failed: s.failed.Load()}
	st.Published = max(s.published.Load(), st.Acked+st.Failed)
	st.Dropped = s.dropped.Load()
	st.InFlight = int(s.inFlight.Load())
	return st
}

// pending is the bookkeeping of one tracked publish: where its outcome goes.
type pending[T any] struct {
	s     *Sink[T]
	fn    func(topic.Result)
	ack   acker.Acknowledger
	id    uint64
	data  any
	batch *batchOutcomes
	one   [1]acker.Outcome
}

// batchOutcomes collects the outcomes of one PublishBatch call and reports
// them together once the last one is in.
type batchOutcomes struct {
	mu   sync.Mutex
	g    acker.Group
	left int // outcomes still expected, plus one while publishing
}

// Publish publishes m.Data (see PublishValue). A nil m is refused with
// ErrNilMessage.
func (s *Sink[T]) Publish(ctx context.Context, m *message.Message[T]) error {
	if m == nil {
		return ErrNilMessage
	}
	return PublishValue(ctx, s, m, m.Data)
}

// PublishValue publishes v on behalf of m, which may carry another payload
// type (a processor handler publishing what it made of its message). With
// ack propagation auto, m is deferred and its outcome is reported when the
// tracked publish resolves, which may be before PublishValue returns (see
// message.Message.Defer); otherwise the pipeline acknowledges m as usual.
// It waits while the topic applies backpressure (queue_on_full block) or the
// publisher has max_in_flight publishes unresolved. It returns an error,
// with nothing published and m not deferred, when ctx ends, the topic is
// closed, Options.Headers panicked (message.PanicError), or (auto only)
// drop_newest found a queue full (topic.ErrDroppedOnFull) or m was
// deferred already (ErrAlreadyDeferred). A nil m is refused with
// ErrNilMessage; on a Sink New did not make (a zero value) it returns an
// error wrapping topic.ErrNotCreated. A nil ctx returns
// topic.ErrNilContext, nothing published and m not deferred; so does
// Publish.
func PublishValue[In, T any](ctx context.Context, s *Sink[T], m *message.Message[In], v T) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	if m == nil {
		return ErrNilMessage
	}
	ack, id, data := m.Acknowledger()
	if s.tracked != nil && m.Deferred() {
		return ErrAlreadyDeferred
	}
	hdr, err := s.headersOf(ctx, m)
	if err != nil {
		return err
	}
	if s.tracked != nil {
		// Before publishing: the outcome may be reported at once.
		m.Defer()
	}
	if err := s.publish(ctx, v, hdr, ack, id, data, nil); err != nil {
		if s.tracked != nil {
			m.Undefer()
		}
		return err
	}
	return nil
}

// headersOf is what m is published with: Options.Headers' answer, or nil
// without it. A panic of Options.Headers is returned as an error wrapping
// a *message.PanicError, and m is then not published.
func (s *Sink[T]) headersOf(ctx context.Context, m message.Keyed) (hdr topic.Headers, err error) {
	if s.headers == nil {
		return nil, nil
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("sink: headers for a message into %s: %w", s.b.Handle.Name(), err)
		}
	}()
	defer message.Recover(&err)
	return s.headers(ctx, m), nil
}

func (s *Sink[T]) publish(ctx context.Context, v T, hdr topic.Headers, ack acker.Acknowledger, id uint64, data any, batch *batchOutcomes) error {
	if s.tracked == nil {
		if s.b.Handle == nil {
			return errZeroSink
		}
		out, err := s.b.Handle.PublishWithHeaders(ctx, v, hdr, s.b.OnFull)
		if err != nil {
			return fmt.Errorf("sink: publish into %s: %w", s.b.Handle.Name(), err)
		}
		if out == topic.DroppedOnFull {
			s.dropped.Add(1)
		} else {
			s.published.Add(1)
		}
		return nil
	}
	p := s.pool.Get().(*pending[T])
	p.ack, p.id, p.data, p.batch = ack, id, data, batch
	s.inFlight.Add(1)
	if err := s.tracked.PublishFuncHeaders(ctx, v, hdr, p.fn); err != nil {
		s.release(p)
		s.settled()
		return fmt.Errorf("sink: publish into %s: %w", s.b.Handle.Name(), err)
	}
	s.published.Add(1)
	return nil
}

// done receives the tracked publish's outcome and reports it upstream. The
// publish counts as reported even when the upstream acknowledger ends the
// goroutine (runtime.Goexit, as t.FailNow does), so that Wait returns.
func (p *pending[T]) done(r topic.Result) {
	s := p.s
	defer s.settled()
	o := acker.Outcome{ID: p.id, Data: p.data}
	if r.Outcome == topic.Acked {
		s.acked.Add(1)
	} else {
		s.failed.Add(1)
		o.Disposition, o.Err = s.failure(r)
	}
	if b := p.batch; b != nil {
		ack := p.ack
		s.release(p)
		b.mu.Lock()
		b.g.Add(ack, o)
		b.left--
		last := b.left == 0
		b.mu.Unlock()
		if last {
			b.g.Flush(s.ctx, s.log)
		}
	} else {
		// The outcome slice lives in p, so reporting does not allocate; p
		// is recycled only after the call.
		p.one[0] = o
		defer s.release(p)
		if o.Err == nil {
			acker.Safe(s.ctx, s.log, p.ack, p.one[:], nil)
		} else {
			acker.Safe(s.ctx, s.log, p.ack, nil, p.one[:])
		}
	}
}

// failure returns the disposition and error a tracked publish that did not
// resolve as acked is reported upstream with. Choosing the disposition
// matches the topic's reason with errors.Is, which calls the reason's own
// Is and Unwrap methods (a downstream subscriber's error), and the
// reason's Error method is called once too, as the upstream acknowledger
// may format the error: when one of them panics, the panic is logged
// once, at error level, on the sink's logger, and the outcome is reported
// failed all the same, with the default disposition and an *OutcomeError
// whose Result.Reason is a *message.PanicError in place of the reason, so
// that the upstream acknowledger, which may match or format the error
// too, is not handed the panic (acker.Safe would recover it, and the
// outcomes of that call would be lost). Only a failed outcome comes here.
func (s *Sink[T]) failure(r topic.Result) (d acker.Disposition, err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &message.PanicError{Value: v, Stack: debug.Stack()}
			s.log.Error(reasonPanicked, slog.String("outcome", r.Outcome.String()),
				slog.String("reason_type", fmt.Sprintf("%T", r.Reason)),
				slog.Any("error", pe), slog.String("stack", string(pe.Stack)))
			err = &OutcomeError{Topic: s.b.Handle.Name(), Result: topic.Result{Outcome: r.Outcome, Reason: pe}}
			d = acker.DispositionDefault
		}
	}()
	if r.Reason != nil {
		_ = r.Reason.Error()
	}
	e := newOutcomeError(s.b.Handle.Name(), r)
	return e.disposition(), e
}

// reasonPanicked is the message a sink logs a reason that panicked while
// matched with or formatted.
const reasonPanicked = "sink: the downstream nack reason panicked when matched or formatted; the message is reported failed with the default disposition"

// newOutcomeError describes a tracked publish that did not resolve as
// acked. A publish the sink's own Close resolved is marked Shutdown.
func newOutcomeError(name topic.Name, r topic.Result) *OutcomeError {
	return &OutcomeError{Topic: name, Result: r,
		Shutdown: r.Outcome == topic.TopicClosed && errors.Is(r.Reason, topic.ErrPublisherClosed)}
}

// disposition is how the upstream source should settle the message. One
// that was not handled downstream because a pipeline shut down (this sink
// was closed before the outcome arrived, the downstream handler was
// interrupted, or the downstream subscription was closed before acking it)
// asks for a retry, so that no source commits past it; any other failure
// keeps the default, the source's documented failure policy.
func (e *OutcomeError) disposition() acker.Disposition {
	if e.Shutdown || e.Result.Outcome == topic.Nacked &&
		(errors.Is(e.Result.Reason, acker.ErrShutdown) || errors.Is(e.Result.Reason, topic.ErrDeliveryDropped)) {
		return acker.DispositionRetry
	}
	return acker.DispositionDefault
}

func (s *Sink[T]) release(p *pending[T]) {
	p.ack, p.data, p.batch = nil, nil, nil
	p.one[0] = acker.Outcome{}
	s.pool.Put(p)
}

// settled counts one tracked publish as reported and wakes Wait at zero.
func (s *Sink[T]) settled() {
	if s.inFlight.Add(-1) != 0 {
		return
	}
	s.mu.Lock()
	if s.inFlight.Load() == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// PublishBatch publishes every message of a batch that has not failed, in
// order. With ack propagation auto the published messages are deferred and
// their outcomes are reported together once all of them have resolved. A
// message that cannot be published is failed (m.Fail) with the error, and
// the pipeline acknowledges it as failed; with ack propagation auto, a
// message deferred already (by another tracked sink) is skipped, its
// outcome being that deferrer's to report. It returns nil: per-message
// problems are on the messages. A nil element of batch, having nowhere to
// put its problem, is skipped; PublishBatch then publishes the others and
// returns an error wrapping ErrNilMessage that names the first one's index.
// A nil ctx returns topic.ErrNilContext, nothing published and no message
// failed or deferred.
func (s *Sink[T]) PublishBatch(ctx context.Context, batch []*message.Message[T]) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	var nilErr error
	var b *batchOutcomes
	if s.tracked != nil {
		b = &batchOutcomes{left: 1}
		// Deferred, so that the outcomes of the messages published are
		// reported even when Options.Headers ends the goroutine
		// (runtime.Goexit) partway through the batch.
		defer s.endBatch(b)
	}
	for i, m := range batch {
		if m == nil {
			if nilErr == nil {
				nilErr = fmt.Errorf("sink: batch[%d]: %w", i, ErrNilMessage)
			}
			continue
		}
		if m.Failed() {
			continue
		}
		if b != nil && m.Deferred() {
			continue // its outcome is another deferrer's to report
		}
		ack, id, data := m.Acknowledger()
		hdr, err := s.headersOf(ctx, m)
		if err != nil {
			m.Fail(err)
			continue
		}
		if b != nil {
			// Before publishing: the outcome may be reported at once.
			m.Defer()
			b.mu.Lock()
			b.left++
			b.mu.Unlock()
		}
		if err := s.publish(ctx, m.Data, hdr, ack, id, data, b); err != nil {
			if b != nil {
				m.Undefer()
				b.mu.Lock()
				b.left--
				b.mu.Unlock()
			}
			m.Fail(err)
			continue
		}
	}
	return nilErr
}

// endBatch drops a PublishBatch's own hold on b: once every message of the
// batch published has resolved, their outcomes are reported together.
func (s *Sink[T]) endBatch(b *batchOutcomes) {
	b.mu.Lock()
	b.left--
	last := b.left == 0
	b.mu.Unlock()
	if last && b.g.Len() > 0 {
		b.g.Flush(s.ctx, s.log)
	}
}

// Handler returns a processor handler that publishes each message's payload
// unchanged (for a pipeline whose processors only forward into the topic).
func (s *Sink[T]) Handler() processor.Handler[T, T] {
	return func(ctx context.Context, m *message.Message[T]) (T, error) {
		if m == nil {
			var zero T
			return zero, ErrNilMessage
		}
		return m.Data, s.Publish(ctx, m)
	}
}

// BatchHandler returns a batch handler that publishes each batch with
// PublishBatch.
func (s *Sink[T]) BatchHandler() batcher.Handler[T] {
	return func(ctx context.Context, batch []*message.Message[T], _ message.BatchInfo) error {
		return s.PublishBatch(ctx, batch)
	}
}

// Wait blocks until every tracked publish has resolved and been reported
// upstream, or ctx ends (it returns ctx.Err()). Publishes made while it
// waits are waited for too. A nil ctx returns topic.ErrNilContext.
func (s *Sink[T]) Wait(ctx context.Context) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle.Wait(ctx, &s.mu, func() bool { return s.inFlight.Load() == 0 })
}

// Close closes the tracked publisher: later publishes fail, and publishes
// still unresolved are reported upstream as failed (ErrClosed). It waits
// until they are reported: those reports are the upstream Ack calls,
// made on the calling goroutine with a context that only a Drain cut short
// ends, so Close returns once they do; Drain bounds the wait by its ctx.
// It never closes the topic. Idempotent: every call returns only once
// those reports are made, also one made while another call makes them.
func (s *Sink[T]) Close() {
	if s.tracked != nil {
		s.tracked.Close()
	}
}

// Drain waits (until ctx ends) for every tracked publish to be reported,
// then closes the sink. It returns ctx.Err() when it stopped waiting; the
// publishes left were then reported as failed by Close, as interrupted by
// the shutdown (acker.DispositionRetry). It is the sink's part of
// pipeline.Drainer: a pipeline that lists the sink in its Drainers calls
// it, with its shutdown timeout, before it closes its source. When ctx
// ends first, the context of the sink's upstream Ack calls ends too (as
// acker.Acknowledger says of the shutdown timeout), those running and
// those Close makes, so that an Ack waiting on its context does not hold
// Drain past ctx. An Ack that ignores its context is waited for
// DrainGrace at most after ctx ends: Drain then returns ctx.Err(), and
// the Close it started goes on until that Ack returns. A nil ctx returns
// topic.ErrNilContext and leaves the sink as it was, open: call Drain
// again with a context.
func (s *Sink[T]) Drain(ctx context.Context) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	err := s.Wait(ctx)
	if err == nil {
		s.Close()
		return nil
	}
	s.endAcks()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.Close()
	}()
	t := time.NewTimer(DrainGrace)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
	}
	return err
}

// DrainGrace is how long a Drain whose ctx has ended still waits for the
// upstream Acks reporting the publishes it gave up on; half the
// pipeline's CancelGrace, so that a pipeline that cut its drain short
// still sees the sink's Drain return.
const DrainGrace = 500 * time.Millisecond
