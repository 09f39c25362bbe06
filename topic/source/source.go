// Package source is a pipeline source that reads an internal topic
// (package topic): a balanced consumer group or a broadcast subscription.
// Its twin, package sink (topic/sink), is the pipeline's side that
// publishes to a topic.
//
//	import "github.com/boulevard-go/boulevard/topic/source"
//
// # Subscriptions and producer concurrency
//
// With a balanced mode (topic.Balanced(group)), every producer stage of the
// pipeline (producer.Options.Concurrency = N) is one member of the group: N
// subscriptions share the group's stream, each message reaching exactly one
// of them. With topic.Broadcast(), the source holds one subscription, shared
// by all N stages, so each message enters the pipeline once whatever N is;
// the stages take turns receiving from it. In both cases each stage
// registers one feed, and takes from its subscription only as many messages
// as the feed has been granted permits: the permit window bounds read-ahead
// exactly as for a broker consumer.
//
// New (or NewContext, the subscribe bounded by its context) subscribes
// the first subscription (stage 0's, or the shared broadcast one) at
// once, so that nothing published after New returns is missed by the
// pipeline; the other balanced members subscribe when their stages
// start. Subscribing can wait on the topic's backend (on a Kafka topic
// whose cluster does not answer, up to kafkatopic's Options.AdminTimeout;
// on a Pulsar topic whose client does not return, up to pulsartopic's
// Options.SubscribeTimeout), so a stage's subscribe runs on a goroutine
// the source owns, under the stage's context: a stage stopped meanwhile
// returns at once, and its subscribe returns as soon as the backend lets
// it, having subscribed nothing, so that the pipeline's stopping does not
// wait for it (a backend that does not honour the context subscribes
// anyway, and Close closes that subscription once it is made). A stage
// that runs again subscribes anew. A backend whose Subscribe panics fails
// that subscribe with an error wrapping a *message.PanicError, logged once
// on Options.Logger, as a subscribe that returned an error fails (New or
// the stage's Run returns it). Close the source if the pipeline is never run.
//
// # Acknowledgement
//
// Each message carries its subscription as acknowledger and its topic
// message ID as acker.Outcome.ID. A successful message is acked on the
// subscription; a failed one is nacked with its error, which a tracked
// upstream publisher sees as the Nack reason. A failed message with
// acker.DispositionDiscard is acked instead (it is done with, and the
// upstream must not retry it), unless its failure was caused by the
// pipeline's shutdown (acker.Interrupted): such a message was not handled,
// so it is always nacked, and its reason, which wraps acker.ErrShutdown,
// tells a tracked upstream publisher (a sink, package topic/sink) to have
// it delivered again. Acks of messages that were published
// untracked are answered topic.ErrMessageNotTracked by the topic; the source
// counts them (Stats.NotTracked) and otherwise ignores them.
//
// # Metadata and headers
//
// A message's Metadata is a *Metadata: the topic, the subscription's mode,
// the stage that received it, the headers it was published with
// (Metadata.Headers, from a sink's Options.Headers or
// topic.Handle.PublishWithHeaders), and how many times it was delivered
// before without being acked (Metadata.Redeliveries, on a Kafka or Pulsar
// topic). Package observe/tracing reads the W3C trace context there, so
// that a traced pipeline continues the trace of the pipeline that
// published the message. Messages without headers, delivered for the
// first time, share their slot's Metadata and cost nothing more; the
// others of one received batch cost one allocation for their Metadata.
//
// # Lag
//
// A broadcast subscriber that falls more than the ring's capacity behind
// receives a lag notice instead of the messages it missed. The source counts
// the notices and the missed messages (Stats.LagNotices, Stats.Missed) and
// logs each notice at warning level, on one line that says whether the
// topic disconnected the subscription. Under on_lag drop_oldest it continues
// with the oldest retained message; under on_lag disconnect the topic closes
// the subscription after the notice, and the source subscribes again at once
// and continues with the messages published from then on. The slot's
// stages receive nothing more until the new subscription is made, and
// Stats.Resubscribes counts it only once it is: when Stats shows as many
// resubscribes as lag notices, the new subscription is in place, and it
// receives every message published from then on (as any broadcast
// subscriber does, as long as it does not fall more than the ring's
// capacity behind in its turn). That subscribe runs on a goroutine the
// source owns, under the context of the stage that began it, as a stage's
// first one does: a stage stopped while it waits returns at once, and the
// next stage to receive from the slot waits for that same subscribe
// instead of making another, unless the stopped stage's context ended it:
// it then subscribes anew.
//
// The replaced subscription stays the acknowledger of the messages it
// delivered; once their outcomes are all in (at once if there were none)
// the source closes it on a goroutine of its own, as closing can wait on
// the topic's backend (on a Kafka topic whose cluster does not answer, up
// to kafkatopic's Options.AdminTimeout): neither receiving from the new
// subscription nor acknowledging waits for it. Close waits for such
// closings under way, within its context.
//
// # Rebalancing
//
// A backend that lets go of part of a subscription (a Kafka topic's
// balanced member whose partition a rebalance revokes) waits, up to its
// own bound (kafkatopic's Options.RevokeTimeout), for the messages of it
// the pipeline holds, and hands those not settled by then to the next
// owner, which handles them again. A message waiting in a batcher's open
// batch is settled only once the batch is emitted, BatchTimeout after it
// opened. So the source subscribes with topic.SubscriberOptions.OnRelease
// set to the current Run's producer.Feed.FlushInFlight: while the
// backend waits, the pipeline's batchers emit their open batches at once,
// and the messages are handled and committed within the wait. With no Run
// receiving through the subscription at that moment, nothing is hurried.
//
// # A broker out of reach
//
// The source subscribes with topic.SubscriberOptions.Reach set, so that
// the topic's backend tells it when a subscription cannot read from its
// broker (see topic.ReachObserver: a Kafka topic's member whose group
// sessions keep failing, a Pulsar topic's consumer that keeps failing to
// reconnect, …). Every stage receiving through that subscription (its
// balanced member's one stage, or all the stages sharing the broadcast
// subscription) is then degraded (producer.RunHealth.Degrade), with the
// backend's error as its LastError, while its Run goes on, and runs
// again once the backend reports that the subscription reads. A stage
// whose Run begins while its subscription cannot read is degraded from
// the start. A subscription that replaces one the topic disconnected
// starts from what its own backend reports. The in-memory backend never
// reports: its stages stay running.
//
// # End of stream
//
// When the topic is closed, the subscriptions end once everything delivered
// to them was received; Run then returns nil, which tells the pipeline the
// source is exhausted (it drains and stops when all its sources are).
package source

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/logburst"
	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// DefaultMaxBatch is the default Options.MaxBatch.
const DefaultMaxBatch = 64

// MaxBatchLimit is the largest Options.MaxBatch, as large as a producer
// stage's permit window can be.
const MaxBatchLimit = 1 << 16

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("source: closed")

// errZeroSource is what Run returns for a Source New did not make (a zero
// value, declared with var): it wraps topic.ErrNotCreated.
var errZeroSource = fmt.Errorf("source: zero Source (make one with New): %w", topic.ErrNotCreated)

// Options configure a Source.
type Options[T any] struct {
	// Topic is the topic to read. Required. Validation checks only that it
	// is set: the handle may be in use by running subscriptions.
	Topic *topic.Handle[T] `validate:"-"`
	// Mode is topic.Balanced(group) or topic.Broadcast(). Required: the
	// zero Mode, a balanced mode without a group, is refused. A balanced
	// mode needs a group that is a valid name (topic.GroupName.Validate).
	Mode topic.SubscriptionMode `name:"-"`
	// MaxBatch is the largest number of messages taken from a subscription
	// at once (never more than the feed has permits for), 1 to
	// MaxBatchLimit. Default 64.
	MaxBatch int `validate:"gte=1,lte=65536"`
	// Logger receives lag notices, acknowledgement problems and panics of
	// the topic backend's Subscribe. Nil means slog.Default().
	Logger *slog.Logger `name:"-"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options[T]) WithDefaults() Options[T] {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	return o
}

// Validate checks o (after WithDefaults) and returns nil or a
// validate.Errors naming every broken rule, for example
// "source.topic is required".
func (o Options[T]) Validate() error {
	var errs []error
	errs = append(errs, validate.Struct("source", &o))
	if o.Topic == nil {
		errs = append(errs, validate.Field("source.topic", "required", "is required"))
	}
	if !o.Mode.IsBroadcast() {
		if o.Mode.Group() == "" {
			errs = append(errs, validate.Field("source.mode", "required",
				"needs a consumer group (topic.Balanced(group)) or topic.Broadcast()"))
		} else if err := o.Mode.Group().Validate(); err != nil {
			errs = append(errs, validate.Field("source.mode", "name",
				"has a consumer group that is not a valid name: "+err.Error()))
		}
	}
	return validate.Join(errs...)
}

// Metadata is what a message's Metadata holds (a *Metadata): where it came
// from, and the headers it was published with. The messages of one
// subscription slot that carry no headers share one Metadata; a message
// with headers has its own. Read it, do not change it.
type Metadata struct {
	// Topic is the topic's name.
	Topic topic.Name
	// Mode is the subscription's mode.
	Mode topic.SubscriptionMode
	// Member is the producer stage index whose balanced subscription
	// received the message (0 for broadcast, whose one subscription all
	// stages share).
	Member int
	// Headers are the headers the message was published with
	// (topic.Item.Headers: a sink's Options.Headers, for example its W3C
	// trace context, which package observe/tracing reads from here); nil
	// when it has none.
	Headers topic.Headers
	// Redeliveries is how many times the subscription had delivered the
	// message before without its being acked (topic.Item.Redeliveries): 0
	// on its first delivery. A backend on a broker counts; the in-memory
	// backend never delivers a message twice. On Kafka the count starts
	// again when the message's partition moves to another member. A
	// HandleFailed that gives up on a message after a few attempts reads
	// it, and sets acker.DispositionDiscard once it is high enough.
	Redeliveries uint32
}

// LogValue describes the message for logs: its topic, and its group or
// "broadcast". The pipeline's failure lines carry it
// (message.Message.LogValue).
func (md *Metadata) LogValue() slog.Value {
	if md == nil {
		return slog.Value{}
	}
	sub := "broadcast"
	if !md.Mode.IsBroadcast() {
		sub = string(md.Mode.Group())
	}
	if md.Redeliveries > 0 {
		return slog.GroupValue(slog.String("topic", string(md.Topic)), slog.String("subscription", sub),
			slog.Uint64("redeliveries", uint64(md.Redeliveries)))
	}
	return slog.GroupValue(slog.String("topic", string(md.Topic)), slog.String("subscription", sub))
}

// Stats are a source's counters.
type Stats struct {
	// Received is the number of messages handed to the pipeline.
	Received uint64
	// LagNotices is the number of lag notices received.
	LagNotices uint64
	// Missed is the number of messages the lag notices reported missed.
	Missed uint64
	// Acked is the number of successful outcomes acked on the topic.
	Acked uint64
	// Nacked is the number of failed outcomes nacked on the topic.
	Nacked uint64
	// NotTracked is the number of acks and nacks the topic answered with
	// topic.ErrMessageNotTracked (untracked publishes, or publishes already
	// settled, timed out for instance).
	NotTracked uint64
	// Subscriptions is the number of subscriptions made.
	Subscriptions uint64
	// Resubscribes is the number of subscriptions made again after the
	// topic disconnected a lagging one, each counted once it has replaced
	// the disconnected one: the stages receive through it from then on.
	Resubscribes uint64
	// SettleFailed is the number of acks and nacks the topic refused with
	// another error than topic.ErrMessageNotTracked, kafkatopic's
	// ErrRevoked among them: a rebalance took the message's partition away
	// first, and the group delivers it again. Many come at once when a
	// partition goes with many messages in flight, so the source logs one
	// WARN line for the first and at most one every 10 s after it, each
	// counting the ones it did not log ("held_back"), and a last one as it
	// closes.
	SettleFailed uint64
}

// Source reads a topic into a pipeline. It implements producer.Source.
// Create it with New.
type Source[T any] struct {
	opts Options[T]
	log  *slog.Logger

	mu     sync.Mutex
	slots  map[int]*slot[T]
	making map[int]*subscribing[T] // the first subscribes of slots under way
	all    []*subscription[T]
	closed bool
	// runs are, per slot index, the feeds of the Runs receiving through
	// the slot now, which its subscriptions' OnRelease reaches. A slot's
	// subscription outlives a Run, so it looks them up when it is called.
	runs map[int]*runFeeds[T]

	// subscribes counts the goroutines that subscribe (goSubscribeLocked).
	// Subscribing can wait on the topic's backend (on a Kafka topic whose
	// cluster does not answer, up to the backend's AdminTimeout), so it
	// never runs under mu: a Run whose context ends stops waiting for it,
	// and Close waits for it only within its context. One is only started
	// under mu while the source is not closed; a subscription made once the
	// source is closed is closed by the goroutine that made it, so the
	// closing, which waits for subscribes, leaves none open.
	subscribes sync.WaitGroup

	// retiring closes the replaced subscriptions dropped from all on a
	// goroutine of its own (the closer); Close waits for it. A
	// subscription is only queued, under mu, as it is dropped from all,
	// which is empty for good once closeAll has taken it, so no closer
	// starts after closeAll waits.
	retiring *liveset.Retiring[*subscription[T]]

	// closing closes the subscriptions held when Close was first called,
	// and waits for the closer, on a goroutine of its own that Close waits
	// for within its context.
	closing liveset.Closing

	received, lagNotices, missed atomic.Uint64
	acked, nacked, notTracked    atomic.Uint64
	subscriptions, resubscribes  atomic.Uint64
	settleFailed                 atomic.Uint64
	// settleLog keeps the WARN lines of failed settlings to one per
	// logburst.Interval.
	settleLog logburst.Limiter
}

// slot is the subscription one stage (balanced) or every stage (broadcast)
// receives from. The turn token serialises receiving, as a subscription
// requires, and guards cur, next and buf.
type slot[T any] struct {
	turn chan struct{}
	cur  *subscription[T]
	// next is the subscribe under way that replaces cur, which the topic
	// disconnected for lagging: nothing is received through the slot
	// until it has ended (resubscribe).
	next *subscribing[T]
	// failed is set when a Receive through cur failed (ended returned
	// its error): the stage's Run fails, and the next holder of the turn
	// replaces cur before it receives (resubscribe), so that the
	// restarted Run does not receive through a subscription that
	// failed, whose backend may never deliver through it again. Only the
	// holder of the turn uses it.
	failed bool
	buf    []topic.Item[T]
	md     *Metadata
}

// subscribing is a subscribe under way on a goroutine of the source's own
// (goSubscribeLocked). done is closed once sub or err is set; cut is set
// with err when the subscribe failed because the context of the stage
// that began it ended, which another stage's wait does not take for its
// own failure: it subscribes anew.
type subscribing[T any] struct {
	done chan struct{}
	sub  *subscription[T]
	err  error
	cut  bool
}

// wait waits for the subscribe until ctx ends, and reports whether it has
// ended (sub and err are then set).
func (p *subscribing[T]) wait(ctx context.Context) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	select {
	case <-p.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// subscription is one topic subscription and the acknowledger of the
// messages received through it.
type subscription[T any] struct {
	src *Source[T]
	sub *topic.Subscription[T]
	// reach hears from the topic's backend whether the subscription
	// can read from its broker (topic.SubscriberOptions.Reach).
	reach *reach[T]
	// lagClosed is set when a lag notice arrived on a disconnect topic: the
	// end of the subscription that follows is a disconnect, not the end of
	// the topic.
	lagClosed bool
	// pending counts the messages delivered through it whose outcomes
	// have not come back; retired is set once a new subscription replaced
	// it. A retired subscription with none pending is dropped and handed
	// to the source's closer (dropLocked), so that a source disconnected
	// again and again does not keep every subscription it ever made.
	pending atomic.Int64
	retired atomic.Bool
}

// New validates opts and subscribes the first subscription. It is
// NewContext with context.Background(): the topic's backend alone bounds
// the subscribe.
func New[T any](opts Options[T]) (*Source[T], error) {
	return NewContext(context.Background(), opts)
}

// NewContext validates opts and subscribes the first subscription, the
// subscribe bounded by ctx: once ctx ends it returns an error wrapping
// ctx.Err() and no source, with nothing subscribed: a subscription the
// topic's backend made as ctx ended is closed before NewContext returns,
// one it makes later once it is made. A nil ctx returns
// topic.ErrNilContext, nothing subscribed.
func NewContext[T any](ctx context.Context, opts Options[T]) (*Source[T], error) {
	if ctx == nil {
		return nil, topic.ErrNilContext
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := cmp.Or(opts.Logger, slog.Default())
	s := &Source[T]{
		opts:   opts,
		log:    log.With(slog.String("topic", string(opts.Topic.Name()))),
		slots:  map[int]*slot[T]{},
		making: map[int]*subscribing[T]{},
		runs:   map[int]*runFeeds[T]{},

		retiring: liveset.NewRetiring(closeSubscriptions[T]),
	}
	if _, err := s.slot(ctx, 0); err != nil {
		if ctx.Err() != nil {
			// The subscribe may still be returning (as soon as the
			// topic's backend lets it): it finds the source closed, and
			// closes what it made. One that made its subscription before
			// the source closed, as ctx ended, left it in all: no source
			// is returned to close it, so it is closed here.
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			s.closeHeld()
			return nil, fmt.Errorf("source: subscribe to %q: %w", opts.Topic.Name(), ctx.Err())
		}
		return nil, err
	}
	return s, nil
}

// Validate reports invalid options; New has already checked them, so it
// returns nil for a Source made by New.
func (s *Source[T]) Validate() error { return s.opts.Validate() }

// Info describes the source to the pipeline: unordered, the default
// window, and the errors of Validate.
func (s *Source[T]) Info() (producer.Info, error) { return producer.Info{}, s.Validate() }

// Stats returns the source's counters. A reading never shows a message
// settled (Acked, Nacked, NotTracked, SettleFailed) that it does not show
// Received, nor a resubscribe that it does not count in Subscriptions.
func (s *Source[T]) Stats() Stats {
	// Each counter after those that count what follows from it: the
	// outcomes before the messages received, which are counted before
	// the pipeline can have them (so a reading never shows a message
	// settled that it does not show received), and the resubscribes
	// before the subscriptions.
	st := Stats{
		Acked:        s.acked.Load(),
		Nacked:       s.nacked.Load(),
		NotTracked:   s.notTracked.Load(),
		SettleFailed: s.settleFailed.Load(),
		Resubscribes: s.resubscribes.Load(),
	}
	st.Received = s.received.Load()
	st.LagNotices = s.lagNotices.Load()
	st.Missed = s.missed.Load()
	st.Subscriptions = s.subscriptions.Load()
	return st
}

// slot returns the slot of a stage, subscribing it on first use. The
// subscribe runs on a goroutine of the source's own, bounded by ctx,
// which a later call for the same stage waits for too: when ctx ends
// first, slot returns ctx.Err() and the subscribe returns as soon as the
// topic's backend lets it, having subscribed nothing. A call that waited
// for a subscribe begun under another context that ended subscribes
// again under its own.
func (s *Source[T]) slot(ctx context.Context, index int) (*slot[T], error) {
	if s.opts.Mode.IsBroadcast() {
		index = 0
	}
	for {
		sl, p, err := s.slotOrSubscribe(ctx, index)
		if p == nil {
			return sl, err
		}
		if !p.wait(ctx) {
			return nil, ctx.Err()
		}
		if p.err == nil {
			s.mu.Lock()
			sl := s.slots[index]
			s.mu.Unlock()
			return sl, nil
		}
		if !p.cut || ctx.Err() != nil {
			return nil, p.err
		}
	}
}

// slotOrSubscribe returns the slot of a stage if it is made, or else the
// subscribe making it, which it starts under ctx if none is under way.
func (s *Source[T]) slotOrSubscribe(ctx context.Context, index int) (*slot[T], *subscribing[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	if sl := s.slots[index]; sl != nil {
		return sl, nil, nil
	}
	p := s.making[index]
	if p == nil {
		p = s.goSubscribeLocked(ctx, index, func(sub *subscription[T]) {
			delete(s.making, index)
			if sub == nil {
				return // the next Run of the stage subscribes again
			}
			// buf grows in Run to the largest batch taken: MaxBatch is
			// only a bound, which the feed's permit window may keep far
			// below.
			sl := &slot[T]{turn: make(chan struct{}, 1), cur: sub,
				md: &Metadata{Topic: s.opts.Topic.Name(), Mode: s.opts.Mode, Member: index}}
			sl.turn <- struct{}{}
			s.slots[index] = sl
			s.runsLocked(index).adopt(sub.reach)
		})
		s.making[index] = p
	}
	return nil, p, nil
}

// goSubscribeLocked starts a subscribe for slot index, bounded by ctx, on
// a goroutine counted in subscribes; s.mu is held and the source is not
// closed. Once the subscription is made it is in all, and made, unless
// nil, is called with it (nil when the subscribe failed), under s.mu,
// before the subscribe's done is closed. A subscription made once the
// source is closed is closed at once by the same goroutine, and the
// subscribe's error is ErrClosed. The subscription's OnRelease reaches
// the feeds of the slot's Runs (runFeeds.flushInFlight).
func (s *Source[T]) goSubscribeLocked(ctx context.Context, index int, made func(*subscription[T])) *subscribing[T] {
	p := &subscribing[T]{done: make(chan struct{})}
	runs := s.runsLocked(index)
	rch := &reach[T]{runs: runs}
	opts := topic.SubscriberOptions{OnRelease: runs.flushInFlight, Reach: rch}
	s.subscribes.Go(func() {
		// A backend whose Subscribe ends the goroutine (runtime.Goexit)
		// fails the subscribe as one that returned an error: the deferred
		// call ends it, so that no wait for it is left unanswered.
		var ts *topic.Subscription[T]
		var err error
		returned := false
		defer func() {
			if !returned {
				s.log.Error(subscribeExited, slog.String("stack", string(debug.Stack())))
				err = errSubscribeExited
			}
			s.subscribed(ctx, p, ts, err, rch, made)
		}()
		ts, err = s.subscribe(ctx, opts)
		returned = true
	})
	return p
}

// subscribed ends p, the subscribe under ctx that made ts or failed with
// err (see goSubscribeLocked).
func (s *Source[T]) subscribed(ctx context.Context, p *subscribing[T], ts *topic.Subscription[T], err error, rch *reach[T], made func(*subscription[T])) {
	if err != nil {
		p.cut = ctx.Err() != nil
		err = fmt.Errorf("source: subscribe to %q: %w", s.opts.Topic.Name(), err)
	}
	s.mu.Lock()
	late := err == nil && s.closed
	switch {
	case late:
		err = ErrClosed
	case err == nil:
		p.sub = &subscription[T]{src: s, sub: ts, reach: rch}
		s.all = append(s.all, p.sub)
		s.subscriptions.Add(1)
	}
	p.err = err
	if made != nil {
		made(p.sub)
	}
	s.mu.Unlock()
	close(p.done)
	if late {
		closeSub(s.log, ts)
	}
}

// subscribe subscribes to the topic with opts. A panic in the topic's backend (a
// backend written by a user, or a codec inside it) is logged once, at
// error level, and returned as a *message.PanicError: the goroutine
// subscribing goes on, and the subscribe fails as one that returned that
// error does.
func (s *Source[T]) subscribe(ctx context.Context, opts topic.SubscriberOptions) (ts *topic.Subscription[T], err error) {
	defer func() {
		if pe, ok := err.(*message.PanicError); ok {
			s.log.Error(subscribePanicked, slog.Any("error", pe), slog.String("stack", string(pe.Stack)))
		}
	}()
	defer message.Recover(&err)
	return s.opts.Topic.Subscribe(ctx, s.opts.Mode, opts)
}

// runsLocked returns the feeds of the Runs of slot index, which it makes
// on first use; s.mu is held.
func (s *Source[T]) runsLocked(index int) *runFeeds[T] {
	r := s.runs[index]
	if r == nil {
		r = &runFeeds[T]{}
		s.runs[index] = r
	}
	return r
}

// runFeeds are the feeds of the Runs receiving through one slot now: a
// balanced slot's one stage, or every stage sharing a broadcast slot,
// with their stages, to which the slot's subscription's reach is told.
type runFeeds[T any] struct {
	mu     sync.Mutex
	feeds  []*producer.Feed[T]
	health []*producer.RunHealth // health[i] is the handle of feeds[i]'s Run
	// from is the reach of the slot's subscription: the reports of
	// another (one the slot no longer uses, or a subscribe that did not
	// become the slot's) reach no stage.
	from *reach[T]
}

// add counts f, the feed of st's current Run, among the feeds until the
// returned remove is called, and tells st whether the slot's
// subscription can read, through the handle of that Run
// (producer.Stage.Health). The Run calls remove before it returns: from
// then on nothing is reported to st for it.
func (r *runFeeds[T]) add(f *producer.Feed[T], st *producer.Stage[T]) (remove func()) {
	r.mu.Lock()
	r.feeds = append(r.feeds, f)
	h := st.Health()
	r.health = append(r.health, h)
	if r.from != nil && r.from.down != nil {
		tell(h, r.from.down)
	}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if i := slices.Index(r.feeds, f); i >= 0 {
			r.feeds = slices.Delete(r.feeds, i, i+1)
			r.health = slices.Delete(r.health, i, i+1)
		}
		r.mu.Unlock()
	}
}

// adopt makes rch, the reach of the subscription the slot receives
// through from now on, the one whose reports reach the slot's stages,
// and tells them its state: a subscription that replaces one that could
// not read may read.
func (r *runFeeds[T]) adopt(rch *reach[T]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.from
	r.from = rch
	if rch.down != nil || (was != nil && was.down != nil) {
		r.tellLocked(rch.down)
	}
}

// tellLocked tells every stage receiving through the slot whether its
// subscription can read; r.mu is held.
func (r *runFeeds[T]) tellLocked(down error) {
	for _, h := range r.health {
		tell(h, down)
	}
}

// tell is where the source reports to a stage's Run whether the
// subscription it receives through can read from its broker: down is why
// it cannot, nil once it reads again. It is only called for a Run among a
// slot's (runFeeds), under that slot's lock, so that nothing is reported
// for a Run once it has left the slot; the Run's handle ignores a report
// once the Run has returned anyway.
func tell(h *producer.RunHealth, down error) {
	if down != nil {
		h.Degrade(down)
		return
	}
	h.Recovered()
}

// reach is one subscription's topic.ReachObserver: it keeps what the
// topic's backend reports, and passes it on to the slot's stages while
// the subscription is the slot's (runFeeds.from).
type reach[T any] struct {
	runs *runFeeds[T]
	down error // guarded by runs.mu: why the subscription cannot read, nil while it can
}

// Degrade notes that the subscription cannot read from its broker, and
// degrades the stages receiving through it (producer.RunHealth.Degrade).
func (r *reach[T]) Degrade(err error) {
	if err == nil {
		err = producer.ErrUnreachable
	}
	r.report(err)
}

// Recovered notes that the subscription reads again, and tells the
// stages receiving through it (producer.RunHealth.Recovered).
func (r *reach[T]) Recovered() { r.report(nil) }

func (r *reach[T]) report(down error) {
	runs := r.runs
	runs.mu.Lock()
	defer runs.mu.Unlock()
	was := r.down
	r.down = down
	if runs.from != r || (down == nil && was == nil) {
		return
	}
	runs.tellLocked(down)
}

// flushInFlight is the slot's subscriptions' OnRelease (see
// topic.SubscriberOptions): the topic's backend waits for messages the
// slot's subscription delivered, so the pipeline's batchers emit their
// open batches at once (producer.Feed.FlushInFlight, which reaches every
// batcher of the pipeline through any of its feeds) until done. With no
// Run receiving through the slot it does nothing.
func (r *runFeeds[T]) flushInFlight() (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.feeds) == 0 {
		return func() {}
	}
	return r.feeds[len(r.feeds)-1].FlushInFlight()
}

// subscribePanicked is the message a topic subscribe that panicked is
// logged with.
const subscribePanicked = "topic subscribe panicked; the subscribe fails"

// subscribeExited is the message a topic subscribe that ended its
// goroutine (runtime.Goexit) is logged with, with the stack of the exit.
const subscribeExited = "topic subscribe ended its goroutine (runtime.Goexit); the subscribe fails"

// errSubscribeExited is the error of a subscribe whose topic backend
// ended the goroutine (runtime.Goexit, as t.FailNow does).
var errSubscribeExited = fmt.Errorf("topic subscribe ended its goroutine (runtime.Goexit) before returning: %w", message.ErrHandlerExited)

// resubscribe replaces the slot's subscription, which the topic
// disconnected for lagging or whose Receive failed (slot.failed), with a
// new one. The caller holds the slot's
// turn, and receives nothing through the slot before resubscribe has
// returned nil. The subscribe runs on a goroutine of the source's own,
// bounded by ctx, recorded as the slot's next: when ctx ends first,
// resubscribe returns ctx.Err() and the subscribe stays the slot's next,
// which the next holder of the turn waits for in its turn (it calls
// resubscribe again) instead of making another, unless it failed for the
// end of ctx: the holder then subscribes anew under its own.
// Stats.Resubscribes counts the new subscription once it is the slot's,
// when it replaces one the topic disconnected for lagging.
func (s *Source[T]) resubscribe(ctx context.Context, sl *slot[T]) error {
	for {
		if sl.next == nil {
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return ErrClosed
			}
			sl.next = s.goSubscribeLocked(ctx, sl.md.Member, nil)
			s.mu.Unlock()
		}
		p := sl.next
		if !p.wait(ctx) {
			return ctx.Err()
		}
		sl.next = nil
		if p.err == nil {
			s.replace(sl, p.sub, !sl.failed)
			sl.failed = false
			return nil
		}
		if !p.cut || ctx.Err() != nil {
			// The next holder of the turn finds cur ended again, and
			// subscribes anew.
			return p.err
		}
	}
}

// replace makes sub the slot's subscription in place of the one the topic
// disconnected, or whose Receive failed, which is retired; lagged counts
// it in Stats.Resubscribes (the topic disconnected the old one for
// lagging).
func (s *Source[T]) replace(sl *slot[T], sub *subscription[T], lagged bool) {
	s.mu.Lock()
	old := sl.cur
	sl.cur = sub
	s.runsLocked(sl.md.Member).adopt(sub.reach)
	if lagged {
		s.resubscribes.Add(1)
	}
	old.retired.Store(true)
	if old.pending.Load() == 0 {
		s.dropLocked(old)
	}
	s.mu.Unlock()
}

// dropLocked removes a retired subscription whose messages are all
// settled from s.all and, if it was there, queues it for the closer,
// starting one if none runs. Closing a subscription can wait on the
// topic's backend (on a Kafka topic whose cluster does not answer, up to
// the backend's AdminTimeout), so neither the receive that replaced it
// nor the Ack of its last message waits for that.
func (s *Source[T]) dropLocked(sub *subscription[T]) {
	i := slices.Index(s.all, sub)
	if i < 0 {
		return
	}
	s.all = slices.Delete(s.all, i, i+1)
	s.retiring.Add(sub)
}

// closeSubscriptions closes subs, each on its own goroutine, and returns
// once all are closed.
func closeSubscriptions[T any](subs []*subscription[T]) {
	_ = liveset.CloseEach(subs, func(sub *subscription[T]) error {
		closeSub(sub.src.log, sub.sub)
		return nil
	})
}

// closePanicked is the message a topic subscription's Close that panicked
// is logged with.
const closePanicked = "topic subscription Close panicked; the subscription counts as closed"

// closeSub closes ts on one of the source's goroutines. A panic in the
// topic's backend (a backend written by a user) is logged once to log,
// at error level, with the stack, and the subscription counts as closed:
// the source's Close goes on.
func closeSub[T any](log *slog.Logger, ts *topic.Subscription[T]) {
	defer panics.Log(context.Background(), log, closePanicked)
	ts.Close()
}

// Run receives from the stage's subscription under the stage's permit
// window until ctx is cancelled (it returns nil) or the topic is closed and
// drained (it returns nil: the source is exhausted). A subscription that
// cannot be made is an error, and the stage restarts the source. So is a
// Receive that fails with another error than a closed subscription or
// topic (a backend whose client gave up the subscription's consumer), or
// that panics or ends the goroutine (runtime.Goexit): the next Run
// through the slot replaces that subscription with a new one before it
// receives, and the failed one is retired. A stage's
// subscribe (its first one, or one replacing a subscription the topic
// disconnected or whose Receive failed) runs on a goroutine the source owns, under ctx: when ctx
// ends while it waits on the topic's backend, Run returns nil at once, and
// the subscribe ends with nothing subscribed as soon as the backend lets
// it (a subscription a backend makes anyway is the stage's next Run's, or
// closed by Close). On a Source New did not make (a zero value), Run
// returns an error wrapping topic.ErrNotCreated at once. A nil ctx
// returns topic.ErrNilContext at once, nothing subscribed or received.
func (s *Source[T]) Run(ctx context.Context, stage *producer.Stage[T]) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	if s.retiring == nil {
		return errZeroSource
	}
	sl, err := s.slot(ctx, stage.Index())
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, topic.ErrTopicClosed) {
			return nil
		}
		return err
	}
	feed := stage.NewFeed(fmt.Sprintf("%s/%d", s.opts.Topic.Name(), stage.Index()), nil)
	s.mu.Lock()
	runs := s.runsLocked(sl.md.Member)
	s.mu.Unlock()
	defer runs.add(feed, stage)()
	ptrs := make([]*message.Message[T], 0, min(s.opts.MaxBatch, stage.Flow().MaxWindow()))
	have := 0
	// turn is set while the Run holds the slot's turn. A Receive of the
	// topic's backend that panics or ends the goroutine (runtime.Goexit)
	// fails the Run with the turn held: it is given back, and the
	// subscription counts as failed, so that the next Run through the
	// slot replaces it and receives, rather than waiting for ever.
	turn := false
	defer func() {
		if turn {
			sl.failed = true
			sl.turn <- struct{}{}
		}
	}()
	for {
		if have == 0 {
			n, err := feed.Acquire(ctx, s.opts.MaxBatch)
			if err != nil {
				return nil // ctx cancelled or the feed closed: stop fetching
			}
			have = n
		}
		select {
		case <-sl.turn:
			turn = true
		case <-ctx.Done():
			return nil
		}
		if sl.next != nil || sl.failed {
			// A resubscribe left under way by a stage stopped while it
			// waited, or a subscription whose Receive failed: nothing is
			// received before a new subscription replaces it.
			if err := s.resubscribe(ctx, sl); err != nil {
				turn = false
				sl.turn <- struct{}{}
				return ended(ctx, err)
			}
		}
		if len(sl.buf) < have {
			sl.buf = make([]topic.Item[T], have)
		}
		sub := sl.cur
		n, err := sub.sub.ReceiveBatch(ctx, sl.buf[:have])
		// A subscription whose Receive failed is replaced by the next
		// holder of the turn (not one the topic disconnected for
		// lagging, replaced below).
		sl.failed = err != nil && ended(ctx, err) != nil
		ptrs = s.convert(sub, sl.md, sl.buf[:n], ptrs[:0])
		// Counted before a resubscribe retires sub, which must not find
		// it settled while these are on their way.
		sub.pending.Add(int64(len(ptrs)))
		if err != nil && ctx.Err() == nil && errors.Is(err, topic.ErrSubscriptionClosed) && sub.lagClosed {
			// Disconnected for lagging: carry on with a new subscription.
			// The lag warning (disconnected=true) told of it already.
			if rerr := s.resubscribe(ctx, sl); rerr == nil {
				err = nil
			} else if !errors.Is(rerr, topic.ErrTopicClosed) {
				err = rerr
			}
		}
		turn = false
		sl.turn <- struct{}{}
		if len(ptrs) > 0 {
			// Counted before Deliver, which may hand them straight to the
			// processors: Stats never shows a message acked before it
			// was received.
			s.received.Add(uint64(len(ptrs)))
			feed.Deliver(ptrs...)
			have -= len(ptrs)
			clear(ptrs)
		}
		if err != nil {
			return ended(ctx, err)
		}
	}
}

// ended is what Run returns when receiving ended with err: nil when ctx
// ended or the subscription, the topic or the source is closed, err
// otherwise.
func ended(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, topic.ErrSubscriptionClosed) || errors.Is(err, topic.ErrTopicClosed) || errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// convert turns received items into messages (one allocation per batch,
// and one more for the Metadata of the batch's messages that carry
// headers or have been delivered before) and handles lag notices.
func (s *Source[T]) convert(sub *subscription[T], md *Metadata, items []topic.Item[T], ptrs []*message.Message[T]) []*message.Message[T] {
	values, headed := 0, 0
	for i := range items {
		if items[i].Lagged == 0 {
			values++
			if items[i].Headers != nil || items[i].Redeliveries > 0 {
				headed++
			}
		}
	}
	var block []message.Message[T]
	if values > 0 {
		block = make([]message.Message[T], values)
	}
	var mds []Metadata
	if headed > 0 {
		mds = make([]Metadata, headed)
	}
	for i := range items {
		it := &items[i]
		if it.Lagged > 0 {
			s.lagNotices.Add(1)
			s.missed.Add(it.Lagged)
			disconnect := s.opts.Topic.Options().Broadcast.OnLag == topic.Disconnect
			if disconnect {
				sub.lagClosed = true
			}
			s.log.Warn("topic subscriber lagged: messages missed",
				slog.Uint64("missed", it.Lagged), slog.Uint64("missed_total", s.missed.Load()),
				slog.Bool("disconnected", disconnect))
			continue
		}
		m := &block[0]
		block = block[1:]
		m.Init(it.Value, sub, uint64(it.ID))
		if it.Headers != nil || it.Redeliveries > 0 {
			own := &mds[0]
			mds = mds[1:]
			*own = *md
			own.Headers, own.Redeliveries = it.Headers, it.Redeliveries
			m.Metadata = own
		} else {
			m.Metadata = md
		}
		ptrs = append(ptrs, m)
		*it = topic.Item[T]{}
	}
	return ptrs
}

// Ack acks successful messages and nacks failed ones on the subscription
// they came from (acker.Acknowledger).
func (a *subscription[T]) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	s := a.src
	for i := range successful {
		s.note(ctx, a.sub.Ack(topic.MessageID(successful[i].ID)), &s.acked)
	}
	for i := range failed {
		o := &failed[i]
		if o.Disposition == acker.DispositionDiscard && !acker.Interrupted(*o) {
			s.note(ctx, a.sub.Ack(topic.MessageID(o.ID)), &s.acked)
			continue
		}
		s.note(ctx, a.sub.Nack(topic.MessageID(o.ID), o.Err), &s.nacked)
	}
	if a.pending.Add(-int64(len(successful)+len(failed))) == 0 && a.retired.Load() {
		s.mu.Lock()
		s.dropLocked(a)
		s.mu.Unlock()
	}
}

func (s *Source[T]) note(ctx context.Context, err error, ok *atomic.Uint64) {
	switch {
	case err == nil:
		ok.Add(1)
	case errors.Is(err, topic.ErrMessageNotTracked):
		s.notTracked.Add(1)
	default:
		s.settleFailed.Add(1)
		s.settleLog.Log(ctx, s.log, slog.LevelWarn, "could not settle a topic message", slog.Any("error", err))
	}
}

// Close closes every subscription the source holds, all at once, and
// waits for the closings of replaced subscriptions already under way. A
// subscribe under way (a stage's first, or one replacing a subscription
// the topic disconnected, which on a Kafka topic whose cluster does not
// answer waits up to kafkatopic's Options.AdminTimeout) is waited for the
// same way, within ctx, and the subscription it makes is closed once it
// is made. Tracked messages still unsettled resolve upstream as nacked with
// topic.ErrDeliveryDropped, which a sink reports to its source as a retry.
//
// It returns nil once every subscription is closed, or, when ctx ends
// first, an error wrapping ctx.Err(). The source is closed from the call
// on either way: it makes no subscription any more.
// topic.Subscription.Close takes no context, so a closing cut short by
// ctx goes on in the background within the bounds of the topic's backend
// (the in-memory backend's is immediate; a Kafka topic's, which leaves
// its group, is bounded by kafkatopic's Options.AdminTimeout; a Pulsar
// topic's by the client's operation timeout), and the unsettled messages
// of a subscription resolve upstream once its closing ends. Failed
// settlings counted and not logged since the last line about them (see
// Stats.SettleFailed) get one last WARN line. Idempotent: a later call
// waits, within its own ctx, for the same closing. On a Source New did
// not make (a zero value), which holds nothing, Close returns nil. A nil
// ctx returns topic.ErrNilContext and leaves the source as it was, open:
// call Close again with a context.
func (s *Source[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topic.ErrNilContext
	}
	if s.retiring == nil {
		return nil
	}
	s.mu.Lock()
	s.closed = true // no subscribe starts any more
	s.mu.Unlock()
	defer s.settleLog.Flush(ctx, s.log, slog.LevelWarn, "could not settle topic messages since the last line; they were counted, not logged")
	if err := liveset.Await(ctx, s.closing.Start(s.closeAll), nil); err != nil {
		return fmt.Errorf("source: closing the subscriptions of topic %q: %w", s.opts.Topic.Name(), err)
	}
	return nil
}

// closeAll closes the subscriptions the source holds (retired ones whose
// outcomes are not all in included: an Ack that comes in later no longer
// finds them, and leaves them be), each on its own goroutine, then waits
// for the closer to finish the closings queued before and for the
// subscribes under way, which close what they make now that the source is
// closed, and returns once all are closed. No subscription joins all once
// the source is closed, so none is left open.
func (s *Source[T]) closeAll() {
	s.closeHeld()
	s.retiring.Wait()
	s.subscribes.Wait()
}

// closeHeld closes the subscriptions the source holds now, each on its
// own goroutine, and waits for them; the source is closed, so none joins
// them later.
func (s *Source[T]) closeHeld() {
	s.mu.Lock()
	all := s.all
	s.all = nil
	s.mu.Unlock()
	closeSubscriptions(all)
}
