package topic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// PublishOutcome says what a publish did.
type PublishOutcome int

const (
	// Published means the message was delivered to every current recipient.
	Published PublishOutcome = iota
	// DroppedOnFull means a balanced group queue was full and the publish did not
	// wait; nothing was delivered anywhere.
	DroppedOnFull
	// MaxInFlightReached means a tracked try-publish found MaxInFlight publishes
	// pending; nothing was published.
	MaxInFlightReached
)

var publishOutcomeNames = []string{"published", "dropped_on_full", "max_in_flight_reached"}

// String returns "published", "dropped_on_full" or "max_in_flight_reached".
func (o PublishOutcome) String() string {
	return enumString(publishOutcomeNames, int(o), "PublishOutcome")
}

// MessageID identifies one publish within a topic; subscribers ack and nack
// by it.
type MessageID uint64

// Item is what a subscription receives: a message, or (Lagged > 0) a lag
// notice saying how many broadcast messages the subscriber missed.
type Item[T any] struct {
	// ID identifies the message for Subscription.Ack and Subscription.Nack.
	ID MessageID
	// Value is the message's payload.
	Value T
	// Headers are the headers the message was published with (see
	// [Handle.PublishWithHeaders]); nil when it has none, and on a lag
	// notice. Every recipient of a publish may see the same map: read it,
	// do not change it.
	Headers Headers
	// Lagged is, on a lag notice, how many broadcast messages the
	// subscriber missed; 0 on an ordinary message.
	Lagged uint64
	// Redeliveries is how many times the message had been delivered to the
	// subscription before without being acked, as far as its backend
	// knows (see [Envelope.Redeliveries]): 0 on a first delivery, on the
	// in-memory backend, and on a lag notice.
	Redeliveries uint32
}

// Headers are a message's optional key/value headers: W3C trace context
// (traceparent, tracestate) or anything else a publisher attaches to a
// message beside its value. Nil means none, and costs nothing: a publish
// without headers carries one nil map reference and allocates nothing for
// it. Headers travel with the message unchanged, through every backend
// (see [Envelope.Headers]), to every recipient.
//
// Get, Set and Keys make Headers an OpenTelemetry
// propagation.TextMapCarrier, so a propagator reads and writes them
// directly. Once published, headers are shared by the topic and every
// recipient, and must not be changed.
type Headers map[string]string

// Get returns the value of key, or "" when h has no such key (or is nil).
func (h Headers) Get(key string) string { return h[key] }

// Set sets key to value. h must not be nil: make it first.
func (h Headers) Set(key, value string) { h[key] = value }

// Keys returns h's keys, in no particular order.
func (h Headers) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// SubscriptionMode is a balanced group membership or a broadcast
// subscription. Build it with [Balanced] or [Broadcast].
type SubscriptionMode struct {
	broadcast bool
	group     GroupName
}

// Balanced subscribes as one member of the consumer group: each message
// reaches exactly one member of each group.
func Balanced(group GroupName) SubscriptionMode { return SubscriptionMode{group: group} }

// Broadcast subscribes to every message published from now on.
func Broadcast() SubscriptionMode { return SubscriptionMode{broadcast: true} }

// IsBroadcast reports whether m is a broadcast subscription.
func (m SubscriptionMode) IsBroadcast() bool { return m.broadcast }

// Group returns the consumer group of a balanced subscription ("" for
// broadcast).
func (m SubscriptionMode) Group() GroupName { return m.group }

// Stats is a snapshot of one topic's counters.
type Stats struct {
	// BalancedGroups is the number of consumer groups with subscribers.
	BalancedGroups int
	// BroadcastSubscribers is the number of connected broadcast subscribers.
	BroadcastSubscribers int
	// Published counts publishes (tracked or not) that did not fail or get
	// dropped. A publish is counted when it starts: one still waiting for
	// room is already counted, and is taken back if it then fails (its ctx
	// ends, the topic closes) or is dropped.
	Published uint64
	// Dropped counts publishes that reported DroppedOnFull.
	Dropped uint64
	// Lagged counts broadcast messages missed by slow subscribers (the sum
	// of all lag notices, including disconnects).
	Lagged uint64
	// InFlight is the number of unresolved tracked publishes, of every
	// tracked publisher of the topic in this process: each leaves it once,
	// as its outcome is settled (acked, nacked, timed out, topic closed);
	// an ack or nack arriving after that changes nothing.
	InFlight int
	// Undecodable counts the messages this process's subscriptions
	// received that the codec could not decode, each skipped for good and
	// logged, a burst in a few lines (a durable backend's; see
	// StateStats).
	Undecodable uint64
	// BroadcastResubscribes counts the times this process's broadcast
	// subscribers subscribed again after losing their connection (a
	// durable backend's; see StateStats): each may have missed what was
	// published meanwhile, and is logged.
	BroadcastResubscribes uint64
	// Partitions are the partitions this process's subscribers read, with
	// their lag (a durable backend's that knows its partitions, kafkatopic;
	// see StateStats).
	Partitions []PartitionStats
}

// Declaration is one topic of a [Broker.CreateTopics] batch. A nil Backend
// means [InMemory].
type Declaration[T any] struct {
	// Name is the topic's name.
	Name Name
	// Options are the topic's options; zero fields take their defaults.
	Options Options
	// Backend implements the topic; nil means InMemory.
	Backend Backend[T]
}

// Broker is a registry of named topics. It is safe for concurrent use. The
// zero Broker is an empty broker ready to use, as NewBroker's is.
type Broker[T any] struct {
	// declaring is held by a declaration throughout, and by Close, so
	// that mu, which lookups take, is never held across a backend's call.
	declaring sync.Mutex
	mu        sync.Mutex
	topics    map[Name]*Handle[T]
	closed    bool          // Close was called: declarations are refused
	shut      chan struct{} // closed once the first Close has closed every topic
}

// NewBroker returns an empty broker.
func NewBroker[T any]() *Broker[T] {
	return &Broker[T]{topics: make(map[Name]*Handle[T])}
}

// CreateTopic creates and registers one topic. See [Broker.CreateTopics],
// which bounds it the same way.
func (b *Broker[T]) CreateTopic(name Name, opts Options, backend Backend[T]) (*Handle[T], error) {
	hs, err := b.CreateTopics([]Declaration[T]{{Name: name, Options: opts, Backend: backend}})
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// CreateInMemoryTopic creates a topic on the [InMemory] backend.
func (b *Broker[T]) CreateInMemoryTopic(name Name, opts Options) (*Handle[T], error) {
	return b.CreateTopic(name, opts, InMemory[T]{})
}

// CreateTopics creates and registers every declared topic, or none: each
// declaration gets defaults applied, is validated, checked against its
// backend's capabilities and instantiated; if any step fails for any of
// them, or a name is empty or invalid (see [Name]), repeated in the batch
// or already registered, the topics already instantiated are closed,
// nothing is registered, and the error names the topic (a [*TopicError]
// wrapping ErrEmptyName, a [*NameError], ErrTopicExists, a
// [validate.Errors], an [*UnsupportedError], the backend's error, or
// ErrNoBackendState when the backend returned neither a state nor an
// error). On a broker already closed (see [Broker.Close]) it declares
// nothing and returns an error wrapping ErrBrokerClosed. It is [Broker.CreateTopicsContext] with context.Background():
// only the backends' own timeouts bound what they do on their brokers
// (kafkatopic's and pulsartopic's Options.AdminTimeout, per topic); the
// in-memory backend does not wait.
func (b *Broker[T]) CreateTopics(decls []Declaration[T]) ([]*Handle[T], error) {
	return b.CreateTopicsContext(context.Background(), decls)
}

// CreateTopicsContext is [Broker.CreateTopics] with ctx bounding what the
// backends do on their brokers to declare the topics. Declarations through
// one broker do not overlap, and [Broker.Close] waits for one under way;
// Topic, Names, Remove and the Close of a registered topic do not.
// A nil ctx returns ErrNilContext, nothing declared or registered.
func (b *Broker[T]) CreateTopicsContext(ctx context.Context, decls []Declaration[T]) ([]*Handle[T], error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	b.declaring.Lock()
	defer b.declaring.Unlock()
	if err := b.checkNew(decls); err != nil {
		return nil, err
	}
	hs := make([]*Handle[T], 0, len(decls))
	fail := func(name Name, err error) ([]*Handle[T], error) {
		for _, h := range hs {
			h.state.Close()
		}
		return nil, &TopicError{Topic: name, Err: err}
	}
	for _, d := range decls {
		h, err := newHandle(ctx, d.Name, d.Options, d.Backend)
		if err != nil {
			return fail(d.Name, err)
		}
		hs = append(hs, h)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics == nil {
		b.topics = make(map[Name]*Handle[T], len(hs))
	}
	for _, h := range hs {
		h.broker = b
		b.topics[h.name] = h
	}
	return hs, nil
}

// checkNew returns the error of the first declaration whose name is
// invalid, repeated in decls or registered already, or an error wrapping
// ErrBrokerClosed once the broker is closed. Only a declaration,
// which the caller holds, registers topics.
func (b *Broker[T]) checkNew(decls []Declaration[T]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("topic: declare topics on a closed broker: %w", ErrBrokerClosed)
	}
	seen := make(map[Name]bool, len(decls))
	for _, d := range decls {
		if err := d.Name.Validate(); err != nil {
			return &TopicError{Topic: d.Name, Err: err}
		}
		if seen[d.Name] || b.topics[d.Name] != nil {
			return &TopicError{Topic: d.Name, Err: ErrTopicExists}
		}
		seen[d.Name] = true
	}
	return nil
}

// NewTopic creates a topic that no broker registers (for tests and
// single-owner uses). nil backend means InMemory. Errors are as for
// [Broker.CreateTopics]. It is [NewTopicContext] with
// context.Background(): only the backend's own timeouts bound the
// declaration, as for [Broker.CreateTopics].
func NewTopic[T any](name Name, opts Options, backend Backend[T]) (*Handle[T], error) {
	return NewTopicContext(context.Background(), name, opts, backend)
}

// NewTopicContext is [NewTopic] with ctx bounding what the backend does on
// its broker to declare the topic, as for [Broker.CreateTopicsContext].
// A nil ctx returns ErrNilContext, nothing declared.
func NewTopicContext[T any](ctx context.Context, name Name, opts Options, backend Backend[T]) (*Handle[T], error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if err := name.Validate(); err != nil {
		return nil, &TopicError{Topic: name, Err: err}
	}
	h, err := newHandle(ctx, name, opts, backend)
	if err != nil {
		return nil, &TopicError{Topic: name, Err: err}
	}
	return h, nil
}

func newHandle[T any](ctx context.Context, name Name, opts Options, backend Backend[T]) (*Handle[T], error) {
	if backend == nil {
		backend = InMemory[T]{}
	}
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := CheckCapabilities(backend.Name(), backend.Capabilities(), opts); err != nil {
		return nil, err
	}
	st, err := backend.NewTopic(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	if noState(st) {
		return nil, fmt.Errorf("%w: backend %q, NewTopic", ErrNoBackendState, backend.Name())
	}
	h := &Handle[T]{name: name, opts: opts, backend: backend.Name(), state: st,
		tracks: slices.Contains(backend.Capabilities().Propagation, PropagationAuto)}
	h.mem, _ = st.(*memTopic[T])
	return h, nil
}

// Topic returns the registered topic of that name.
func (b *Broker[T]) Topic(name Name) (*Handle[T], bool) {
	b.mu.Lock()
	h, ok := b.topics[name]
	b.mu.Unlock()
	return h, ok
}

// Names returns the registered topic names, sorted.
func (b *Broker[T]) Names() []Name {
	b.mu.Lock()
	out := make([]Name, 0, len(b.topics))
	for n := range b.topics {
		out = append(out, n)
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Remove unregisters and closes the topic; it reports whether the topic
// was registered. It waits for the closing as [Handle.Close] does.
func (b *Broker[T]) Remove(name Name) bool {
	b.mu.Lock()
	h, ok := b.topics[name]
	delete(b.topics, name)
	b.mu.Unlock()
	if ok {
		h.Close()
	}
	return ok
}

// Close unregisters and closes every topic, one after another, each
// waiting as [Handle.Close] does. It first waits for a declaration under
// way (see [Broker.CreateTopicsContext]), so that it closes what that
// registers. A closed broker refuses new topics: CreateTopic and the
// like return an error wrapping [ErrBrokerClosed]. Close may be called
// more than once: a later call, or one made at the same time, returns
// once the first has closed every topic.
func (b *Broker[T]) Close() {
	b.declaring.Lock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.declaring.Unlock()
		<-b.shut
		return
	}
	b.closed = true
	b.shut = make(chan struct{})
	defer close(b.shut)
	hs := make([]*Handle[T], 0, len(b.topics))
	for _, h := range b.topics {
		hs = append(hs, h)
	}
	clear(b.topics)
	b.mu.Unlock()
	b.declaring.Unlock()
	for _, h := range hs {
		h.Close()
	}
}

// unregister removes h if it is still the topic registered under its name.
func (b *Broker[T]) unregister(h *Handle[T]) {
	b.mu.Lock()
	if b.topics[h.name] == h {
		delete(b.topics, h.name)
	}
	b.mu.Unlock()
}

// Handle is one topic: publish into it, subscribe to it, close it. It is
// safe for concurrent use. Make one with [Broker.CreateTopic] (or
// CreateTopics, CreateInMemoryTopic) or [NewTopic]: a zero Handle has no
// topic behind it, so its publish, Subscribe and Tracked methods return an
// error wrapping [ErrNotCreated], its Stats are zero and Close does nothing.
type Handle[T any] struct {
	name    Name
	opts    Options
	backend string
	tracks  bool // the backend declares PropagationAuto: tracked publishers are allowed
	state   State[T]
	mem     *memTopic[T] // state, when it is the in-memory backend's: called directly
	broker  *Broker[T]

	// seq numbers every publish attempt (its MessageID); unpublished counts
	// the attempts that failed or were dropped, so that the hot path pays
	// for one atomic add, not two: Published = seq - unpublished.
	seq         atomic.Uint64
	unpublished atomic.Uint64
	dropped     atomic.Uint64
	inFlight    atomic.Int64

	mu        sync.Mutex
	closed    bool
	closeDone chan struct{} // closed when the first Close has finished
	trackers  map[*trackerCore]struct{}
}

// Name returns the topic's name.
func (h *Handle[T]) Name() Name { return h.name }

// Options returns the topic's options, defaults applied.
func (h *Handle[T]) Options() Options { return h.opts }

// Backend returns the name of the topic's backend.
func (h *Handle[T]) Backend() string { return h.backend }

func (h *Handle[T]) nextID() MessageID { return MessageID(h.seq.Add(1)) }

// Publish publishes v, untracked, to every current recipient, applying the
// topic's balanced.on_full when a group queue is full: with Block (the
// default) it waits for room; with DropNewest it returns ErrDroppedOnFull.
// It returns nil, ctx.Err(), ErrTopicClosed or ErrDroppedOnFull (or, on a
// zero Handle, an error wrapping ErrNotCreated); on an error nothing was
// published. A nil ctx returns ErrNilContext, nothing published.
func (h *Handle[T]) Publish(ctx context.Context, v T) error {
	if ctx == nil {
		return ErrNilContext
	}
	out, err := h.publishEnvelope(ctx, Envelope[T]{ID: h.nextID(), Value: v}, h.opts.Balanced.OnFull, false)
	if err == nil && out == DroppedOnFull {
		return ErrDroppedOnFull
	}
	return err
}

// PublishWith publishes v with the full-queue policy onFull (a per-publisher
// override of balanced.on_full; broadcast never waits). It returns
// Published, or DroppedOnFull under DropNewest when a group queue was full,
// or an error with nothing published: ctx.Err(), ErrTopicClosed, an error
// wrapping ErrUnknownOnFull when onFull is neither Block nor DropNewest, or
// one wrapping ErrNotCreated on a zero Handle. A nil ctx returns
// ErrNilContext, nothing published.
func (h *Handle[T]) PublishWith(ctx context.Context, v T, onFull OnFull) (PublishOutcome, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	if !knownOnFull(onFull) {
		return 0, h.unknownOnFull(onFull)
	}
	return h.publishEnvelope(ctx, Envelope[T]{ID: h.nextID(), Value: v}, onFull, false)
}

// PublishWithHeaders is [Handle.PublishWith] with headers: every recipient
// receives hdr with the message, in [Item.Headers]. A nil hdr publishes
// exactly as PublishWith does. The topic keeps hdr as it is given, without
// copying it: do not change it after the call. A nil ctx returns
// ErrNilContext, nothing published.
func (h *Handle[T]) PublishWithHeaders(ctx context.Context, v T, hdr Headers, onFull OnFull) (PublishOutcome, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	if !knownOnFull(onFull) {
		return 0, h.unknownOnFull(onFull)
	}
	return h.publishEnvelope(ctx, Envelope[T]{ID: h.nextID(), Value: v, Headers: hdr}, onFull, false)
}

// TryPublish publishes v without waiting for room: Published, or
// DroppedOnFull if a balanced group queue is full (then nothing reaches any
// recipient, broadcast included), or ErrTopicClosed (or, on a zero Handle,
// an error wrapping ErrNotCreated). On the in-memory backend it does not
// wait at all; a backend that sends to a broker waits for its answer,
// within its own send timeout (pulsartopic: Options.SendTimeout;
// kafkatopic: Options.Config.Producer.Timeout and Retry), as no ctx bounds
// it.
func (h *Handle[T]) TryPublish(v T) (PublishOutcome, error) {
	return h.publishEnvelope(context.Background(), Envelope[T]{ID: h.nextID(), Value: v}, DropNewest, true)
}

// knownOnFull reports whether o is Block or DropNewest.
func knownOnFull(o OnFull) bool { return uint(o) < uint(len(onFullNames)) }

// unknownOnFull is the error of a publish with an OnFull knownOnFull refuses.
func (h *Handle[T]) unknownOnFull(o OnFull) error {
	return &TopicError{Topic: h.name, Err: fmt.Errorf("publish with on_full %s: %w", o, ErrUnknownOnFull)}
}

func (h *Handle[T]) publishEnvelope(ctx context.Context, e Envelope[T], onFull OnFull, try bool) (PublishOutcome, error) {
	var out PublishOutcome
	var err error
	switch {
	case h.mem != nil:
		out, err = h.mem.publish(ctx, e, try || onFull == DropNewest)
	case h.state == nil:
		err = errZeroHandle
	case try:
		out, err = h.state.TryPublish(e)
	default:
		if err = ctx.Err(); err == nil {
			out, err = h.state.Publish(ctx, e, onFull)
		}
	}
	if err != nil || out != Published {
		h.unpublished.Add(1)
		if err == nil && out == DroppedOnFull {
			h.dropped.Add(1)
		}
	}
	return out, err
}

// Subscribe adds a subscriber: Balanced(group) joins a consumer group
// (created on its first member), Broadcast() receives every message
// published from now on. It returns ErrSubscribeBalancedNotSupported,
// ErrSubscribeBroadcastNotSupported, ErrSubscribeSingleGroupViolation or
// ErrTopicClosed wrapped in a [*TopicError] naming the topic, or, for a
// balanced mode whose group breaks the rules of [GroupName], ErrEmptyName
// or a [*NameError]; a [*TopicError] wrapping ErrNoBackendState when the
// backend returned neither a subscription nor an error; on a zero Handle,
// an error wrapping ErrNotCreated.
//
// ctx bounds the subscribe: a backend on a broker waits for it (a Kafka
// topic's group join, a Pulsar subscribe). Once ctx ends, Subscribe
// returns a [*TopicError] wrapping ctx.Err() and has subscribed nothing:
// what the backend made for it is closed, at once or when the broker's
// call it could not interrupt returns. With ctx already ended it returns
// that error before looking at anything else (but a zero Handle's).
// A nil ctx returns a [*TopicError] wrapping ErrNilContext the same way,
// nothing subscribed.
func (h *Handle[T]) Subscribe(ctx context.Context, mode SubscriptionMode, opts SubscriberOptions) (*Subscription[T], error) {
	if h.state == nil {
		return nil, errZeroHandle
	}
	if ctx == nil {
		return nil, &TopicError{Topic: h.name, Err: ErrNilContext}
	}
	if err := ctx.Err(); err != nil {
		return nil, &TopicError{Topic: h.name, Err: err}
	}
	if !mode.broadcast {
		if err := mode.group.Validate(); err != nil {
			return nil, err
		}
	}
	st, err := h.state.Subscribe(ctx, mode, opts)
	if err != nil {
		return nil, &TopicError{Topic: h.name, Err: err}
	}
	if noState(st) {
		return nil, &TopicError{Topic: h.name, Err: fmt.Errorf("%w: backend %q, Subscribe", ErrNoBackendState, h.backend)}
	}
	s := &Subscription[T]{h: h, st: st, mode: mode}
	switch x := st.(type) {
	case *memMember[T]:
		s.member = x
		s.most = x.g.q.Cap()
	case *ringSub[T]:
		s.most = x.r.capacity
	}
	return s, nil
}

// Tracked returns a new tracked publisher. Zero fields of opts take the
// topic's ack_propagation values. It returns ErrTopicClosed on a closed
// topic, a validate.Errors for a negative MaxInFlight, a MaxInFlight
// above MaxInFlightLimit or a Timeout other than 0 below 1ms, or, when the
// topic's backend does not declare PropagationAuto (it cannot carry
// outcomes back to publishers), an [*UnsupportedError] naming
// ack_propagation.mode auto. On a zero Handle it returns an error wrapping
// ErrNotCreated.
func (h *Handle[T]) Tracked(opts TrackedOptions) (*TrackedPublisher[T], error) {
	if h.state == nil {
		return nil, errZeroHandle
	}
	if err := validateTracked(opts); err != nil {
		return nil, err
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = h.opts.AckPropagation.MaxInFlight
	}
	if opts.Timeout == 0 {
		opts.Timeout = h.opts.AckPropagation.Timeout
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrTopicClosed
	}
	if !h.tracks {
		return nil, &UnsupportedError{Backend: h.backend, What: "ack_propagation.mode",
			Value: PropagationAuto.String(), Err: ErrUnsupportedPolicy}
	}
	all := h.opts.Mode == BroadcastOnly && h.opts.Broadcast.AckMode == AckAll
	// Only the in-memory backend counts every delivery of a publish; a
	// durable backend delivers a nacked message again.
	log := cmp.Or(opts.Logger, slog.Default())
	c := newTrackerCore(all, h.mem != nil, opts.MaxInFlight, opts.Timeout, &h.inFlight, h.name, log, opts.FailureLogInterval)
	if h.trackers == nil {
		h.trackers = make(map[*trackerCore]struct{})
	}
	h.trackers[c] = struct{}{}
	return &TrackedPublisher[T]{h: h, core: c, onFull: opts.OnFull}, nil
}

func (h *Handle[T]) detachTracker(c *trackerCore) {
	h.mu.Lock()
	delete(h.trackers, c)
	h.mu.Unlock()
}

// Close closes the topic: publishing returns ErrTopicClosed, subscribers
// receive what was already delivered to them and then ErrSubscriptionClosed,
// new subscriptions are refused, every tracked publisher is closed and its
// unresolved receipts resolve as TopicClosed (reason ErrTopicClosed). If a
// broker registers the topic, it is unregistered. Idempotent; every call
// returns only once all of that is done. On a zero Handle it does nothing.
//
// No ctx bounds it. It waits for the backend's closing, which the backend
// bounds even when its brokers do not answer (kafkatopic: within
// Options.AdminTimeout; pulsartopic: Options.SendTimeout for the
// publishes under way, then the client's operation timeout; the in-memory
// backend does not wait), and for the done callbacks of the tracked
// publishes it resolves, which run on the calling goroutine and must not
// block (see [TrackedPublisher.PublishFunc]). topic/config's Wired.Close
// closes topics within a ctx.
func (h *Handle[T]) Close() {
	if h.state == nil {
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		<-h.closeDone
		return
	}
	h.closed = true
	h.closeDone = make(chan struct{})
	defer close(h.closeDone)
	trackers := h.trackers
	h.trackers = nil
	h.mu.Unlock()
	h.state.Close()
	for c := range trackers {
		c.close(ErrTopicClosed)
	}
	if h.broker != nil {
		h.broker.unregister(h)
	}
}

// Stats returns a snapshot of the topic's counters (zero on a zero Handle).
func (h *Handle[T]) Stats() Stats {
	if h.state == nil {
		return Stats{}
	}
	ss := h.state.Stats()
	unpublished := h.unpublished.Load() // before seq, so the difference is ≥ 0
	published := h.seq.Load() - unpublished
	return Stats{
		BalancedGroups:        ss.BalancedGroups,
		BroadcastSubscribers:  ss.BroadcastSubscribers,
		Published:             published,
		Dropped:               h.dropped.Load(),
		Lagged:                ss.Lagged,
		InFlight:              int(h.inFlight.Load()),
		Undecodable:           ss.Undecodable,
		BroadcastResubscribes: ss.BroadcastResubscribes,
		Partitions:            ss.Partitions,
	}
}

// Subscription receives from a topic and acks / nacks what it received.
// Receive and ReceiveBatch must not be called concurrently on one
// subscription (use several subscriptions of one group for parallel
// consumers); Ack, Nack and Close may be called from any goroutine. Make
// one with [Handle.Subscribe]: a zero Subscription belongs to no topic, so
// its Receive, ReceiveBatch, Ack and Nack return an error wrapping
// [ErrNotCreated] and Close does nothing.
type Subscription[T any] struct {
	h      *Handle[T]
	st     SubscriptionState[T]
	member *memMember[T] // st, when it is an in-memory group member: called directly
	mode   SubscriptionMode
	buf    []Envelope[T]
	// most is the most one receive can return (the in-memory queue's or
	// ring's capacity), so that a huge ReceiveBatch buffer does not size
	// buf; 0 when the backend does not say.
	most int

	mu        sync.Mutex
	closed    bool
	closeDone chan struct{}         // closed when the first Close has finished
	pending   map[MessageID]*Ticket // tracked deliveries received and not yet settled
	// sweepAt is the size of pending at which recv next drops the entries
	// whose publish is settled already (see sweepLocked).
	sweepAt int
}

// minSweep is the smallest size of Subscription.pending that is swept.
const minSweep = 64

// Mode returns how the subscription was made.
func (s *Subscription[T]) Mode() SubscriptionMode { return s.mode }

// Receive waits for the next item: a message, or a lag notice (Lagged > 0).
// It returns ErrSubscriptionClosed once the subscription or topic is closed
// and everything delivered to it was received, and ctx.Err() when ctx is
// done first (nothing is consumed then). A nil ctx returns ErrNilContext,
// nothing consumed.
func (s *Subscription[T]) Receive(ctx context.Context) (Item[T], error) {
	n, err := s.recv(ctx, 1)
	if n == 0 {
		return Item[T]{}, err
	}
	e := &s.buf[0]
	it := Item[T]{ID: e.ID, Value: e.Value, Headers: e.Headers, Lagged: e.Lagged, Redeliveries: e.Redeliveries}
	*e = Envelope[T]{}
	return it, nil
}

// ReceiveBatch waits for at least one item and fills dst[:n] with up to
// len(dst) items that are ready, without waiting for more. Errors are as
// for Receive; given a dst of length 0 it returns 0, ErrEmptyDst at
// once, consuming nothing, whatever ctx and the subscription's state. On
// the in-memory backend n is at most the capacity of the subscription's
// queue (balanced.queue_capacity) or ring (broadcast.queue_capacity), and
// what the subscription keeps for receiving is sized by that capacity,
// whatever len(dst) is.
func (s *Subscription[T]) ReceiveBatch(ctx context.Context, dst []Item[T]) (int, error) {
	if len(dst) == 0 {
		return 0, ErrEmptyDst
	}
	n, err := s.recv(ctx, len(dst))
	for i := range n {
		e := &s.buf[i]
		dst[i] = Item[T]{ID: e.ID, Value: e.Value, Headers: e.Headers, Lagged: e.Lagged, Redeliveries: e.Redeliveries}
		*e = Envelope[T]{}
	}
	return n, err
}

func (s *Subscription[T]) recv(ctx context.Context, max int) (int, error) {
	if s.member == nil && s.st == nil {
		return 0, errZeroSubscription
	}
	if ctx == nil {
		return 0, ErrNilContext
	}
	if s.most > 0 && max > s.most {
		max = s.most
	}
	if len(s.buf) < max {
		s.buf = make([]Envelope[T], max)
	}
	var n int
	var err error
	if s.member != nil {
		n, err = s.member.Receive(ctx, s.buf[:max])
	} else {
		n, err = s.st.Receive(ctx, s.buf[:max])
	}
	if n == 0 {
		return 0, err
	}
	tracked := false
	for i := range n {
		if s.buf[i].Ticket != nil {
			tracked = true
			break
		}
	}
	if !tracked {
		return n, nil
	}
	s.mu.Lock()
	if s.closed {
		// Taken while the subscription was closing: an in-memory group
		// member gives it back to its group, where another member takes
		// it (or drops it, see memMember.putBack); any other
		// subscription drops it.
		s.mu.Unlock()
		if s.member != nil {
			s.member.giveBack(s.buf[:n])
			return 0, ErrSubscriptionClosed
		}
		for i := range n {
			s.buf[i].Ticket.Drop(ErrDeliveryDropped)
			s.buf[i] = Envelope[T]{}
		}
		return 0, ErrSubscriptionClosed
	}
	if s.pending == nil {
		s.pending = make(map[MessageID]*Ticket)
	}
	for i := range n {
		if t := s.buf[i].Ticket; t != nil {
			s.pending[s.buf[i].ID] = t
		}
	}
	if len(s.pending) >= s.sweepAt {
		s.sweepLocked()
	}
	s.mu.Unlock()
	return n, nil
}

// sweepLocked forgets the received deliveries whose publish is settled
// already (acked by another recipient under ack_mode first, nacked, timed
// out or closed): acking or nacking them could only return
// ErrMessageNotTracked, which it still does once they are forgotten. A
// subscriber that never settles what it receives (a broadcast audit beside
// the group that acks) would otherwise keep every tracked message it ever
// received. The next sweep comes when pending has doubled again, so the
// cost per received message stays constant. s.mu is held.
func (s *Subscription[T]) sweepLocked() {
	for id, t := range s.pending {
		if t.state() != ticketPending {
			delete(s.pending, id)
			t.release() // this delivery will never be reported
		}
	}
	s.sweepAt = max(minSweep, 2*len(s.pending))
}

// Ack acknowledges a received message: a tracked publish resolves as
// Acked, and a backend with [FeatureDurable] commits it. It returns
// ErrMessageNotTracked if neither happened: the message was not received by
// this subscription or is already settled, or it was published untracked on
// a backend that does not settle deliveries (in memory). It does not wait
// for a broker's answer; a tracked publish's done callback (see
// [TrackedPublisher.PublishFunc]) runs on the calling goroutine.
func (s *Subscription[T]) Ack(id MessageID) error {
	return s.settle(id, nil)
}

// Nack rejects a received message with reason (nil means ErrNacked): a
// tracked publish resolves as Nacked with that reason, and a backend with
// [FeatureDurable] delivers the message again. Errors are as for Ack.
func (s *Subscription[T]) Nack(id MessageID, reason error) error {
	if reason == nil {
		reason = ErrNacked
	}
	return s.settle(id, reason)
}

// settle resolves the tracked ticket of id, if any, and tells a backend
// that settles deliveries. An error of the backend other than
// ErrMessageNotTracked is returned even when the ticket resolved.
func (s *Subscription[T]) settle(id MessageID, reason error) error {
	if s.st == nil {
		return errZeroSubscription
	}
	settled := false
	if t := s.take(id); t != nil {
		if reason == nil {
			settled = t.ack()
		} else {
			settled = t.nack(reason)
		}
	}
	if s.member == nil { // the in-memory backend's members settle nothing
		switch err := s.st.Settle(id, reason); {
		case err == nil:
			settled = true
		case !errors.Is(err, ErrMessageNotTracked):
			return err
		}
	}
	if !settled {
		return ErrMessageNotTracked
	}
	return nil
}

func (s *Subscription[T]) take(id MessageID) *Ticket {
	s.mu.Lock()
	t := s.pending[id]
	if t != nil {
		delete(s.pending, id)
	}
	s.mu.Unlock()
	return t
}

// Close leaves the topic. Tracked messages received and not yet acked or
// nacked, and (for the last member of a group or a broadcast subscriber)
// those delivered to it but not yet received, resolve as Nacked with
// ErrDeliveryDropped. A Receive waiting concurrently returns
// ErrSubscriptionClosed. On the in-memory backend a group member takes no
// message once its Close has begun: a message a concurrent Receive took
// as Close began is not returned but goes back to the head of the group's
// queue, for the other members, unless another member has taken a message
// since (it would receive this one after a later one) or none is left:
// then it is dropped, a tracked one resolving as Nacked with
// ErrDeliveryDropped. A panic of the backend's Close reaches the caller,
// as one of its Receive or Settle does, once those tracked messages are
// resolved. Idempotent: a later call, or one made at the same time,
// returns once the first has finished. No ctx bounds it: it waits for the
// backend's Close, which bounds itself even when the broker does not
// answer (kafkatopic: within Options.AdminTimeout; pulsartopic: the
// client's operation timeout; the in-memory backend does not wait).
func (s *Subscription[T]) Close() {
	if s.st == nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.closeDone
		return
	}
	s.closed = true
	s.closeDone = make(chan struct{})
	defer close(s.closeDone)
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	// Dropped even when the backend's Close panics: the panic then reaches
	// the caller once they are.
	defer dropAll(pending)
	s.st.Close()
}

// dropAll resolves the tracked deliveries of pending as Nacked with
// ErrDeliveryDropped.
func dropAll(pending map[MessageID]*Ticket) {
	for _, t := range pending {
		t.Drop(ErrDeliveryDropped)
	}
}

// noState tells whether a backend answered with no state: a nil
// interface, or a nil pointer, map, slice, channel or function in one.
func noState(st any) bool {
	if st == nil {
		return true
	}
	switch v := reflect.ValueOf(st); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return v.IsNil()
	}
	return false
}
