package pulsartopology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/group"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/pulsarsize"
	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// ErrDeclare wraps a failure to create a topic's producer or a
// subscription while declaring a topology, and a Declare whose context
// ended first.
var ErrDeclare = errors.New("pulsartopology: declaring a topology failed")

// ErrSubscribe wraps a failure to subscribe a reader (Subscribe,
// SubscribeDead), and a subscribe whose context ended first.
var ErrSubscribe = errors.New("pulsartopology: subscribing a reader failed")

// ErrSend wraps a failure to send a message (Publish, Hold, Requeue,
// DeadLetter, a dead-letter reader's marker): creating the topic's
// producer, or the broker's receipt, failed, or did not come by the
// send's context's deadline or Options.OperationTimeout, whichever is
// first (the error then wraps context.DeadlineExceeded). A send that
// got no receipt (its deadline ended, or the broker refused the producer
// over a backlog quota) retires the topic's producer, so that the client
// does not send it later, when the producer reconnects, as well as the
// caller's next attempt: the next send creates another producer, and the
// retired one is closed once the other sends waiting on it have their
// receipts or have ended their deadlines.
var ErrSend = errors.New("pulsartopology: sending a message failed")

// ErrLetterTooLarge is wrapped by [*LetterTooLargeError].
var ErrLetterTooLarge = errors.New("pulsartopology: letter too large to hold and dead-letter")

// LetterTooLargeError is the error of a Publish whose message, with the
// properties a hold or a dead-lettering adds to it later (the letter's
// history, the group a hold releases it to, its Death) and a hold's
// delivery time, would be larger than the broker takes
// (Options.MaxMessageSize): such a letter could be delivered but neither
// held nor dead-lettered, and it would come back after every redelivery
// delay for good. Nothing was sent. It wraps [ErrLetterTooLarge] and
// pulsar.ErrMessageTooLarge.
type LetterTooLargeError struct {
	// Topic is the Pulsar topic the letter was published to.
	Topic string
	// Size is what the letter takes of its message as Pulsar counts a
	// message's size: its payload, and its key and properties as the
	// message's metadata encodes them.
	Size int
	// Reserve is what the topology keeps under Limit for the rest of the
	// metadata, at its largest: the properties a hold or a dead-lettering
	// adds, a hold's delivery time, and the fields the client writes
	// itself (the producer's name, the sequence id, the publish time).
	// Publish takes a letter of at most Limit-Reserve bytes.
	Reserve int
	// Limit is Options.MaxMessageSize.
	Limit int
}

// Error names the topic, the letter's size, the reserve and the limit.
func (e *LetterTooLargeError) Error() string {
	return fmt.Sprintf("pulsartopology: letter of %d bytes refused by topic %q: a letter takes at most %d bytes (Options.MaxMessageSize %d less %d kept for the metadata of a hold or a dead-lettering)",
		e.Size, e.Topic, e.Limit-e.Reserve, e.Limit, e.Reserve)
}

// Unwrap returns ErrLetterTooLarge and pulsar.ErrMessageTooLarge.
func (e *LetterTooLargeError) Unwrap() []error {
	return []error{ErrLetterTooLarge, pulsar.ErrMessageTooLarge}
}

// DeadSubscription is the subscription dead-letter readers share on a DLQ.
const DeadSubscription = "dead"

// Backend is the Pulsar topology backend. Create it with [New] and Close
// it when done; it is safe for concurrent use.
type Backend[T any] struct {
	opts   Options[T]
	client pulsar.Client
	owned  bool
	log    *slog.Logger

	// crashed is set by crash: from then on nothing is sent or
	// acknowledged, as if the process had died.
	crashed atomic.Bool
	// ttlUnread is set once a Declare could not read a topic's message
	// TTL and logged it: the WARN is logged once in the backend's life.
	ttlUnread atomic.Bool
	// evictionUnread is set once a Declare could not read a topic's
	// backlog quotas or subscription expiration and logged it: the WARN
	// is logged once in the backend's life.
	evictionUnread atomic.Bool

	closing liveset.Closing // what Close started
	// closeStarted ends when Close is first called (endAdmin): the calls
	// of Options.Admin under way end with it (see adminContext).
	closeStarted context.Context
	endAdmin     context.CancelFunc

	mu        sync.RWMutex
	closed    bool
	producers map[string]pulsar.Producer
	// sending counts, by producer, the sends waiting on it for their
	// receipt; retired holds, by retired producer, a channel closed once
	// none is left (see retire).
	sending map[pulsar.Producer]int
	retired map[pulsar.Producer]chan struct{}
	// creating holds the creations of producers under way, by topic: the
	// calls that need a topic's producer meanwhile share its creation.
	creating map[string]*creation
	readers  map[*reader[T]]struct{}
	// calls are the client calls under way that create something (a
	// Declare, a Subscribe, a producer's creation); the closing waits for
	// each until Options.OperationTimeout has passed since it began (see
	// bounded). Shut under mu with closed, so that no call starts once
	// closed, and what a call under way makes once closed it closes
	// itself.
	calls group.Background
}

// creation is the creation of a topic's producer, on a goroutine of the
// backend. done is closed once it has ended: p is then the producer, which
// the backend keeps, or err says why there is none (topology.ErrClosed
// when the backend closed meanwhile, the producer then being closed).
type creation struct {
	done chan struct{}
	p    pulsar.Producer
	err  error
}

// New validates opts and returns a backend. With ServiceURL it makes its
// own client through sources/pulsar's NewClient (bounded timeouts, logs
// with the URL's user information redacted); nothing is sent to the broker
// before the first Declare.
func New[T any](opts Options[T]) (*Backend[T], error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	b := &Backend[T]{opts: opts, client: opts.Client, log: opts.Logger,
		producers: map[string]pulsar.Producer{}, sending: map[pulsar.Producer]int{}, retired: map[pulsar.Producer]chan struct{}{}, creating: map[string]*creation{}, readers: map[*reader[T]]struct{}{}}
	b.closeStarted, b.endAdmin = context.WithCancel(context.Background())
	if b.client == nil {
		// The client gives up within Options.OperationTimeout, the most
		// Close waits for a call under way, so that none of its calls
		// outlives Close.
		co := spulsar.ClientDefaultsWithin(opts.ClientOptions, opts.OperationTimeout)
		co.URL = opts.ServiceURL
		c, err := spulsar.NewClient(co, opts.Logger)
		if err != nil {
			return nil, err
		}
		b.client, b.owned = c, true
	}
	return b, nil
}

// Name returns "pulsar".
func (b *Backend[T]) Name() string { return "pulsar" }

// String names the backend and its broker, without credentials: the
// service URL of a client the backend made, its user information
// redacted, or "a shared client". %v, %+v, %#v, %s and %q all print this.
func (b *Backend[T]) String() string {
	if b == nil {
		return "pulsartopology backend (nil)"
	}
	if u, ok := b.client.(interface{ ServiceURL() string }); ok {
		return "pulsartopology backend for " + spulsar.RedactURL(u.ServiceURL())
	}
	return "pulsartopology backend for a shared client"
}

// GoString is String: the backend's fields hold the client and its
// options.
func (b *Backend[T]) GoString() string { return b.String() }

// Format writes String for every verb (%q quotes it).
func (b *Backend[T]) Format(f fmt.State, verb rune) {
	s := b.String()
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = fmt.Fprint(f, s)
}

// LogValue logs what String shows.
func (b *Backend[T]) LogValue() slog.Value { return slog.StringValue(b.String()) }

// MarshalJSON encodes String.
func (b *Backend[T]) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

// TopicName returns the full Pulsar topic of a topology name (a main
// topic, a hold queue or a DLQ): persistent://<tenant>/<namespace>/<name>,
// each '/' of the name written '~', as package topic/pulsartopic names
// topics.
func (b *Backend[T]) TopicName(name string) string {
	return "persistent://" + b.opts.Tenant + "/" + b.opts.Namespace + "/" + strings.ReplaceAll(name, "/", "~")
}

// Declare creates what t needs and does not exist yet: the main topic, the
// hold topics and the DLQ (each by creating its producer), the consumer
// group's subscription on the main topic at its latest message (so the
// group receives everything published after Declare returns, however late
// its first reader subscribes) and on every hold topic, and the DLQ's
// subscription DeadSubscription. Subscribing to an existing subscription
// keeps its position, so Declare is idempotent. With Options.Admin, it
// first reads the message TTL in effect on the hold topics and the DLQ,
// and refuses a hold not shorter than its topic's TTL with a *TTLError
// wrapping ErrHoldOutlastsTTL, making no subscription (see
// Options.Admin). ctx and
// Options.OperationTimeout bound it: it returns by the first of their
// deadlines, with an error wrapping ErrDeclare and the context's error
// when the broker has not answered by then (see the package
// documentation, Bounded calls). A nil Backend returns topology.ErrClosed,
// as a closed one does.
// A Backend New did not make returns an error wrapping
// topic.ErrNotCreated at once, and topology.ErrClosed once closed.
// A nil ctx returns topology.ErrNilContext, nothing declared.
func (b *Backend[T]) Declare(ctx context.Context, t *topology.Topology) (topology.Queues[T], error) {
	if ctx == nil {
		return nil, topology.ErrNilContext
	}
	if b == nil {
		return nil, topology.ErrClosed
	}
	if t == nil {
		return nil, errors.New("pulsartopology: Declare with a nil topology")
	}
	if b.endAdmin == nil { // a Backend New did not make
		if liveset.Closed(&b.mu, &b.closed) {
			return nil, topology.ErrClosed
		}
		return nil, errZeroBackend
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, b.opts.OperationTimeout)
	defer cancel()
	q := &queues[T]{b: b, t: t, main: b.TopicName(t.Name()), subType: pulsar.Shared}
	if _, seq := t.Sequenced(); seq {
		q.subType = pulsar.KeyShared
	}
	if !t.IsBroadcast() {
		q.group = t.ConsumerGroup()
	}
	return bounded(caller, b, ErrDeclare, fmt.Sprintf("declaring topology %q", t.Name()), func() (topology.Queues[T], error) {
		if err := b.declare(ctx, q); err != nil {
			return nil, err
		}
		q.reserve = reserve(t, b.longestProducerName(t))
		return q, nil
	}, func(topology.Queues[T]) {})
}

// errZeroBackend is what Declare returns on a Backend New did not make,
// until it is closed.
var errZeroBackend = fmt.Errorf("pulsartopology: zero Backend (make one with New): %w", topic.ErrNotCreated)

// declare does Declare's work, one client call after the other; once ctx
// has ended it makes nothing more (a producer's creation it was waiting
// for then goes on, and the backend keeps the producer, see create).
func (b *Backend[T]) declare(ctx context.Context, q *queues[T]) error {
	t := q.t
	if err := b.ensureTopic(ctx, q.main); err != nil {
		return err
	}
	for _, h := range t.Holds() {
		full := b.TopicName(h.Name)
		if err := b.ensureTopic(ctx, full); err != nil {
			return err
		}
		q.holds = append(q.holds, hold{full: full, delay: h.Delay})
	}
	if dlq, ok := t.DLQ(); ok {
		q.dlq = b.TopicName(dlq)
		if err := b.ensureTopic(ctx, q.dlq); err != nil {
			return err
		}
	}
	if err := b.checkTTL(ctx, q); err != nil {
		return err
	}
	if err := b.checkEviction(ctx, q); err != nil {
		return err
	}
	if q.dlq != "" {
		if err := b.ensureSubscription(ctx, q.dlq, DeadSubscription, pulsar.Shared, pulsar.SubscriptionPositionEarliest); err != nil {
			return err
		}
	}
	if q.group != "" {
		if err := b.ensureSubscription(ctx, q.main, q.group, q.subType, pulsar.SubscriptionPositionLatest); err != nil {
			return err
		}
		for _, h := range q.holds {
			if err := b.ensureSubscription(ctx, h.full, q.group, q.subType, pulsar.SubscriptionPositionEarliest); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend[T]) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// ensureTopic creates the producer of full unless the backend has it; a
// producer creates a missing non-partitioned topic.
func (b *Backend[T]) ensureTopic(ctx context.Context, full string) error {
	_, err := b.producer(ctx, ErrDeclare, full)
	return err
}

// producer returns the backend's producer on full. Unless the backend has
// it, it waits, within ctx, for its creation: the one under way, or one it
// starts on a goroutine of the backend (create). When ctx ends first it
// returns an error wrapping kind and ctx.Err(); the creation goes on
// without it. It holds no lock of the backend while it waits.
func (b *Backend[T]) producer(ctx context.Context, kind error, full string) (pulsar.Producer, error) {
	b.mu.RLock()
	p, closed := b.producers[full], b.closed
	b.mu.RUnlock()
	if p != nil && !closed {
		return p, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: topic %q: %w", kind, full, err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, topology.ErrClosed
	}
	if p := b.producers[full]; p != nil {
		b.mu.Unlock()
		return p, nil
	}
	c := b.creating[full]
	if c == nil {
		c = &creation{done: make(chan struct{})}
		b.creating[full] = c
		// Not shut: Close shuts calls under mu as it marks the backend
		// closed.
		b.calls.TryStart(func() { b.create(full, c) })
	}
	b.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: creating a producer on topic %q: %w", kind, full, ctx.Err())
	}
	switch {
	case c.err == nil:
		return c.p, nil
	case errors.Is(c.err, topology.ErrClosed):
		return nil, topology.ErrClosed
	default:
		return nil, fmt.Errorf("%w: creating a producer on topic %q: %w", kind, full, c.err)
	}
}

// create creates the producer on full for c, waiting for the client up to
// Options.OperationTimeout (see bounded), whoever still waits for it. The
// backend keeps the producer for its later sends, unless it closed
// meanwhile: the producer is then closed, before the backend's closing
// goes on. A creation abandoned fails its callers with an error wrapping
// ErrAbandoned, and the next call that needs the producer starts another;
// the producer the abandoned call makes, if it ever returns, is closed.
func (b *Backend[T]) create(full string, c *creation) {
	defer close(c.done)
	// No send timeout: each send is bounded by its context instead (the
	// send timeout's timer outlives a closed producer in pulsar-client-go
	// v0.21.0).
	p, err := group.Await(context.Background(), &b.calls, b.opts.OperationTimeout, func() (pulsar.Producer, error) {
		return b.client.CreateProducer(pulsar.ProducerOptions{Topic: full, DisableBatching: true, SendTimeout: -1})
	}, pulsar.Producer.Close)
	switch {
	case errors.Is(err, group.ErrShut):
		err = topology.ErrClosed
	case errors.Is(err, group.ErrAbandoned):
		err = b.abandon(fmt.Sprintf("creating a producer on topic %q", full))
	}
	b.mu.Lock()
	delete(b.creating, full)
	closed := b.closed
	if err == nil && !closed {
		b.producers[full] = p
	}
	b.mu.Unlock()
	switch {
	case closed:
		if err == nil {
			p.Close()
		}
		c.err = topology.ErrClosed
	case err != nil:
		c.err = err
	default:
		c.p = p
	}
}

// longestProducerName returns the length of the longest name of the
// backend's producers on t's topics.
func (b *Backend[T]) longestProducerName(t *topology.Topology) int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	for _, name := range t.Names() {
		if p := b.producers[b.TopicName(name)]; p != nil {
			n = max(n, len(p.Name()))
		}
	}
	return n
}

// ensureSubscription creates the durable subscription sub on full, at pos,
// unless it exists: a consumer with no receiver queue (it is granted no
// message) subscribes and leaves.
func (b *Backend[T]) ensureSubscription(ctx context.Context, full, sub string, typ pulsar.SubscriptionType, pos pulsar.SubscriptionInitialPosition) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: subscription %q on topic %q: %w", ErrDeclare, sub, full, err)
	}
	if b.isClosed() {
		return topology.ErrClosed
	}
	c, err := b.client.Subscribe(pulsar.ConsumerOptions{
		Topic: full, SubscriptionName: sub, Type: typ,
		SubscriptionInitialPosition: pos, EnableZeroQueueConsumer: true,
	})
	if err != nil {
		return fmt.Errorf("%w: subscription %q on topic %q: %w", ErrDeclare, sub, full, err)
	}
	c.Close()
	return nil
}

// send publishes msg to full and waits for the broker's receipt (and,
// first, for the topic's producer to be created, unless the backend has
// it) until the earliest of ctx's deadline and Options.OperationTimeout;
// it then returns an error wrapping ErrSend and
// context.DeadlineExceeded. Only the deadline bounds it: an operation of
// the queues must complete even with its context cancelled (see
// topology.Queues).
func (b *Backend[T]) send(ctx context.Context, full string, msg *pulsar.ProducerMessage) error {
	if b.crashed.Load() {
		return topology.ErrClosed
	}
	deadline := time.Now().Add(b.opts.OperationTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	return b.sendWithin(ctx, full, msg)
}

// sendWithin is send bounded by ctx alone, its cancellation included:
// once ctx ends it returns an error wrapping ErrSend and ctx.Err().
func (b *Backend[T]) sendWithin(ctx context.Context, full string, msg *pulsar.ProducerMessage) error {
	if b.crashed.Load() {
		return topology.ErrClosed
	}
	began := time.Now()
	var p pulsar.Producer
	for {
		var err error
		p, err = b.producer(ctx, ErrSend, full)
		if err != nil {
			// The producer's creation, on a topic the backend has no
			// producer for yet, failed: against a broker gone away, the
			// error says so.
			return b.failed(err, began)
		}
		if b.begin(full, p) {
			break
		}
		// p was retired meanwhile: the next producer takes the send.
	}
	_, err := p.Send(ctx, msg)
	b.end(full, p, err != nil && (ctx.Err() != nil || errors.Is(err, pulsar.ErrProducerBlockedQuotaExceeded) || errors.Is(err, pulsar.ErrProducerClosed)))
	if err != nil {
		if errors.Is(err, pulsar.ErrProducerClosed) && (b.isClosed() || b.crashed.Load()) {
			return topology.ErrClosed
		}
		// A send on the topic's producer that fails while the client
		// cannot connect (its producer waiting to reconnect to a broker
		// gone away) says so, as one that creates the producer does.
		if ended := ctx.Err(); ended != nil && !errors.Is(err, ended) {
			// pulsar-client-go reports a send that ended waiting for room
			// in the producer's queue with an error of its own.
			return b.disconnected(fmt.Errorf("%w: topic %q: %w: %w", ErrSend, full, ended, b.redact(err)), began)
		}
		return b.disconnected(fmt.Errorf("%w: topic %q: %w", ErrSend, full, b.redact(pulsarsize.Refusal(err))), began)
	}
	return nil
}

// begin counts a send on p, the backend's producer on full, unless p is
// no longer that producer (it was retired, or the backend closed): it
// then returns false and counts nothing.
func (b *Backend[T]) begin(full string, p pulsar.Producer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.producers[full] != p {
		return false
	}
	b.sending[p]++
	return true
}

// end uncounts a send on p that begin counted, once it returned, and
// retires p when retire is set (see retire); once p is retired and no
// send waits on it, its closing goes on.
func (b *Backend[T]) end(full string, p pulsar.Producer, retire bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.sending[p] - 1
	if n > 0 {
		b.sending[p] = n
	} else {
		delete(b.sending, p)
	}
	if retire {
		b.retire(full, p)
	}
	if idle, ok := b.retired[p]; ok && n == 0 {
		close(idle)
		delete(b.retired, p)
	}
}

// retire forgets p, the backend's producer on full, after a send on it
// that got no receipt (its deadline ended, the broker refused the producer
// over a backlog quota, or the client closed it): the next send creates
// another producer, and p takes no new send. p is closed on a goroutine
// of the backend once every send still waiting on it has returned (its
// receipt came, or its deadline ended), or Options.OperationTimeout after
// it was retired, or when the backend's Close begins, whichever is first:
// the sends it still holds then (such as those queued while it reconnects
// to a broker that refuses it) are dropped rather than sent once it
// reconnects, after their callers gave up, and a send still waiting on it
// fails with an error wrapping ErrSend. A closed backend closes its
// producers itself. Called with b.mu held.
func (b *Backend[T]) retire(full string, p pulsar.Producer) {
	if b.closed || b.producers[full] != p {
		return
	}
	delete(b.producers, full)
	idle := make(chan struct{})
	b.retired[p] = idle
	// Not shut: Close shuts calls under mu as it marks the backend
	// closed.
	b.calls.TryStart(func() {
		t := time.NewTimer(b.opts.OperationTimeout)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
		case <-b.closeStarted.Done():
		}
		p.Close()
	})
}

// track registers a reader to close with the backend; false when closed.
func (b *Backend[T]) track(r *reader[T]) bool { return liveset.Add(&b.mu, &b.closed, b.readers, r) }

func (b *Backend[T]) untrack(r *reader[T]) { liveset.Remove(&b.mu, b.readers, r) }

// Close waits for the calls under way that create something (a Declare, a
// Subscribe, the creation of a topic's producer, even one its callers no
// longer wait for: each until it returns, or at most until
// Options.OperationTimeout has passed since it began, when it is
// abandoned; what they make then is closed), then closes every reader
// (what each received and did not settle is delivered again to its
// subscription by the broker), all at once, then the producers, all at
// once, and, when the backend made it, the client. A producer a send
// retired (see ErrSend) is closed as Close begins. What the hold topics
// and the DLQ hold stays on the broker.
//
// pulsar-client-go's Close calls take no context: each waits for the
// broker's answer to its close request for at most the client's
// operation timeout (pulsar.ClientOptions.OperationTimeout; the backend's
// own client has sources/pulsar's default, DefaultOperationTimeout), so
// the closing takes at most about Options.OperationTimeout for the calls
// under way, and then one client operation timeout each for closing what
// they made, the readers and the producers. The calls of Options.Admin
// of a Declare under way are ended at once (their context ends), and that
// Declare returns topology.ErrClosed. Close returns nil once it is done; if ctx ends
// first, it returns an error wrapping ctx.Err() and the closing goes on in
// the background, within those bounds. Idempotent: a later call waits,
// within its own ctx, for the same closing. Close of a nil Backend
// returns nil, and so does that of one New did not make, whose later
// calls then report it closed.
// A nil ctx returns topology.ErrNilContext and leaves the backend as it
// was, open: call Close again with a context.
func (b *Backend[T]) Close(ctx context.Context) error {
	if ctx == nil {
		return topology.ErrNilContext
	}
	if b == nil {
		return nil
	}
	b.mu.Lock()
	b.closed = true // Declare, Subscribe and new producers refuse at once
	b.calls.Shut()
	b.mu.Unlock()
	if b.endAdmin != nil { // nil in a Backend New did not make
		b.endAdmin() // a Declare's admin calls under way end now
	}
	return await(ctx, b.closing.Start(b.close), "the backend")
}

func (b *Backend[T]) close() {
	<-b.calls.Idle() // closed is set: what they make from now on, they close
	b.mu.Lock()
	rs := make([]*reader[T], 0, len(b.readers))
	for r := range b.readers {
		rs = append(rs, r)
	}
	ps := make([]pulsar.Producer, 0, len(b.producers))
	for _, p := range b.producers {
		ps = append(ps, p)
	}
	b.producers = nil
	b.mu.Unlock()
	dones := make([]<-chan struct{}, len(rs))
	for i, r := range rs {
		dones[i] = r.shut()
	}
	for _, d := range dones {
		<-d
	}
	_ = liveset.CloseEach(ps, func(p pulsar.Producer) error {
		p.Close()
		return nil
	})
	if b.owned {
		b.client.Close()
	}
}

// await waits for done, a reader's or the backend's closing, until ctx
// ends, and then returns an error wrapping ctx.Err() that names what was
// closing.
func await(ctx context.Context, done <-chan struct{}, what string) error {
	if err := liveset.Await(ctx, done, nil); err != nil {
		return fmt.Errorf("pulsartopology: closing %s: %w", what, err)
	}
	return nil
}

// crash closes the backend as a crash would: from the call on nothing more
// is sent or acknowledged, so what a reader received and did not settle is
// delivered again, and what a hold topic holds is released when due to the
// next process. The closing is bounded by ctx as Close's.
func (b *Backend[T]) crash(ctx context.Context) error {
	b.crashed.Store(true)
	return b.Close(ctx)
}

// hold is one declared hold topic.
type hold struct {
	full  string
	delay time.Duration
}

var _ topology.Backend[int] = (*Backend[int])(nil)
