// Package pulsar is a Boulevard source that consumes Apache Pulsar topics
// with github.com/apache/pulsar-client-go, under the producer stage's permit
// window.
//
// Each producer stage subscribes one consumer per configured topic on the
// client the user created and shares (the source never closes it). A message
// that a pipeline handles successfully is acked; one that fails is nacked,
// and the broker redelivers it after ConsumerOptions.NackRedeliveryDelay
// (pulsar-client-go's default is one minute), up to a DLQ policy's
// MaxDeliveries when one is set. On KeyShared, Exclusive and Failover
// subscriptions the source is ordered: each key, or each partition, is
// handled by one processor in delivery order (see Source.Info). See
// docs/pulsar.md for the permit mapping, failure handling, ordering and
// metadata.
//
// The sub-package pulsartest is an in-process Pulsar broker for tests.
package pulsar

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/group"
	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// Source consumes Pulsar topics for a pipeline. It implements
// producer.Source[[]byte] (the payload is the message's bytes). Create it
// with New.
type Source struct {
	opts   Options
	broker string // the client's redacted service URL, when known
	suffix string // ends every consumer name: this process and source

	mu     sync.Mutex
	live   map[*consumer]struct{}
	closed bool
	bg     group.Background // subscribe calls that outlived their Run, and the consumer closes of retire and Close
	// warnedDLQ is set once the source has said that a DLQ policy cannot
	// fire on its subscription type.
	warnedDLQ atomic.Bool

	droppedAcks    atomic.Int64
	replaced       atomic.Int64
	callbackPanics atomic.Int64
	received       atomic.Int64
	redelivered    atomic.Int64
	acked          atomic.Int64
	nacked         atomic.Int64
	deadLettered   atomic.Int64
	granted        atomic.Int64
	abandoned      atomic.Int64
}

var _ producer.Source[[]byte] = (*Source)(nil)

// New returns a source with opts. It does not validate them: pipeline.New
// calls Validate, and Run validates again.
func New(opts Options) *Source {
	opts = opts.WithDefaults()
	opts.Topics = append([]string(nil), opts.Topics...)
	s := &Source{opts: opts, live: make(map[*consumer]struct{}), suffix: opts.NameSuffix}
	if s.suffix == "" {
		s.suffix = nameSuffix(sources.Add(1))
	}
	if c, ok := opts.Client.(interface{ ServiceURL() string }); ok {
		s.broker = redact.URL(c.ServiceURL())
	}
	if c, ok := opts.Client.(*Client); ok && c != nil && c.last != nil {
		c.last.countReconnects(opts.Subscription)
	}
	return s
}

// clean returns err with the credentials of the source's client taken out
// of its message (see Client.Redact), when the client can tell them.
func (s *Source) clean(err error) error {
	if c, ok := s.opts.Client.(interface{ Redact(error) error }); ok {
		return c.Redact(err)
	}
	return err
}

// Validate reports every broken option rule (see Options.Validate), or
// ErrNotCreated for a nil *Source.
func (s *Source) Validate() error {
	if s == nil {
		return ErrNotCreated
	}
	return s.opts.Validate()
}

// Info describes the source to the pipeline, which reads it when it is
// created:
//   - Ordered on a KeyShared, Exclusive or Failover subscription unless
//     Options.Unordered (or, on KeyShared, a KeySharedPolicy with
//     AllowOutOfOrderDelivery): the pipeline then routes messages by their
//     partition key, so that each key (KeyShared: the message's ordering
//     key, else its key) or each partition's topic (Exclusive, Failover) is
//     handled by one processor in the order the broker delivered it;
//     unordered on a Shared subscription, whose broker keeps no order.
//     A PartitionBy of the application's replaces the partition key, and a
//     failed message comes back after later messages of its key or
//     partition were handled (docs/pulsar.md, Ordering);
//   - the default window;
//   - the errors of Validate.
func (s *Source) Info() (producer.Info, error) {
	if s == nil {
		return producer.Info{}, ErrNotCreated
	}
	ordered := s.opts.SubscriptionType.keyed() && !s.opts.Unordered
	if ks := s.opts.Consumer.KeySharedPolicy; s.opts.SubscriptionType == KeyShared && ks != nil && ks.AllowOutOfOrderDelivery {
		ordered = false // the broker keeps no order then
	}
	return producer.Info{Ordered: ordered}, s.Validate()
}

// Stats are the source's counters, summed over its consumers (every
// producer stage and topic). Counters ending in a total only grow; the
// others describe the open consumers now. Each message Received has at
// most one outcome counted, so that
//
//	Received = Acked + Nacked + DroppedAcks + in flight + interrupted
//
// where in flight are the messages whose outcome has not reached the
// client yet (being handled, or queued for the consumer's ack goroutine),
// and interrupted those that failed as the pipeline shut down
// (acker.Interrupted: neither acked nor nacked, the broker delivers them
// again). Once the source is idle, with nothing interrupted, Received =
// Acked + Nacked + DroppedAcks.
type Stats struct {
	// Consumers is the number of consumers currently open.
	Consumers int
	// Replaced is the number of consumers closed because their stage
	// failed and was restarted.
	Replaced int64
	// DroppedAcks is the number of outcomes dropped because their consumer
	// had been closed or replaced, or because its ack queue was full, or
	// still held them when it closed, while the client took no acks (see
	// docs/pulsar.md, The ack queue). The broker redelivers those
	// messages. A failure the pipeline's shutdown caused
	// (acker.Interrupted) is never counted: it is neither acked nor nacked
	// anyway.
	DroppedAcks int64
	// CallbackPanics is the number of panics recovered from
	// Options.ActiveStateCallback.
	CallbackPanics int64
	// Received is the number of messages the source took from the client
	// and delivered to its stages.
	Received int64
	// Redelivered is the number of those that the broker had delivered
	// before (a RedeliveryCount above 0). On Exclusive and Failover
	// subscriptions the broker counts nothing, so a rewound message is not
	// counted here.
	Redelivered int64
	// Acked is the number of messages the source handed to the client to
	// acknowledge: those handled, and those failed with
	// DispositionDiscard. An acknowledgement the client fails is counted
	// too, and logged (the broker redelivers that message).
	Acked int64
	// Nacked is the number of messages the source asked the broker to
	// redeliver (failed outcomes other than DispositionDiscard).
	Nacked int64
	// DeadLettered is the number of messages the client routed to the
	// dead-letter topic instead of delivering them (ConsumerOptions.DLQ:
	// their redelivery count reached MaxDeliveries).
	DeadLettered int64
	// PermitsGranted is the number of permits the stages' feeds granted the
	// consumers, since the source started.
	PermitsGranted int64
	// PermitsAvailable is the number of those the open consumers have not
	// used yet.
	PermitsAvailable int64
	// ReconnectFailures is the number of failed attempts of the client's
	// consumers of the subscription to reconnect to a broker after their
	// connection closed (Client.ReconnectFailures): it grows while a
	// broker cannot be reached, and stays put while a topic is only
	// quiet. A broker lost while a stage is still subscribing fails the
	// stage instead (its restarts' subscribes fail until the broker is
	// back), which this does not count. 0 when Options.Client was not made
	// by NewClient.
	ReconnectFailures int64
	// SubscribesAbandoned is the number of the client's subscribe calls
	// the source stopped waiting for after Options.SubscribeTimeout; each
	// failed its stage. A call that never returns holds the client's
	// goroutines of that consumer until the process ends.
	SubscribesAbandoned int64
	// ClientQueue is how many messages the clients of the open consumers
	// may hold or be owed by the broker beyond what the source took: the
	// sum of their reserves (receiver queue × partitions, see
	// docs/pulsar.md, Flow control).
	ClientQueue int
}

// Stats returns the source's counters. Acked + Nacked + DroppedAcks, and
// Redelivered, never exceed Received, nor PermitsAvailable PermitsGranted.
func (s *Source) Stats() Stats {
	if s == nil {
		return Stats{}
	}
	// Each counter after those that count what follows from it: the
	// outcomes and redeliveries before the messages received, and the
	// permits available before those granted.
	st := Stats{
		Replaced:       s.replaced.Load(),
		DroppedAcks:    s.droppedAcks.Load(),
		CallbackPanics: s.callbackPanics.Load(),
		Acked:          s.acked.Load(),
		Nacked:         s.nacked.Load(),
		DeadLettered:   s.deadLettered.Load(),

		SubscribesAbandoned: s.abandoned.Load(),
	}
	st.Redelivered = s.redelivered.Load()
	st.Received = s.received.Load()
	if c, ok := s.opts.Client.(*Client); ok {
		st.ReconnectFailures = c.ReconnectFailures(s.opts.Subscription)
	}
	s.mu.Lock()
	st.Consumers = len(s.live)
	for c := range s.live {
		st.PermitsAvailable += max(0, c.permits.Load())
		st.ClientQueue += c.plan.reserve
	}
	s.mu.Unlock()
	st.PermitsGranted = s.granted.Load()
	return st
}

// Run subscribes one consumer per topic for this producer stage and moves
// their messages into the stage, each consumer within its own feed's
// permits. It returns nil when ctx is cancelled, leaving the consumers open
// so that the draining pipeline can still acknowledge what they delivered
// (Close closes them). It returns an error, after closing every consumer of
// the stage, when the options are invalid, when a consumer cannot subscribe
// or when one is closed under it: the pipeline then restarts the stage with
// new consumers. On a closed source it returns an error wrapping
// ErrSubscribe at once, having subscribed nothing on the broker. Closing
// them waits for the broker's answers only until ctx ends: the closes
// then go on in the background, and Close waits for them. A nil ctx
// returns ErrNilContext at once, nothing subscribed.
func (s *Source) Run(ctx context.Context, st *producer.Stage[[]byte]) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s == nil {
		return ErrNotCreated
	}
	flow := st.Flow()
	if err := validate.Join(s.opts.Validate(), validateFlow(flow)); err != nil {
		return err
	}
	if t := s.opts.SubscriptionType; s.opts.Consumer.DLQ != nil && (t == Exclusive || t == Failover) &&
		s.warnedDLQ.CompareAndSwap(false, true) {
		st.Logger().Warn("a DLQ policy never fires on an exclusive or failover subscription: the broker keeps no redelivery counts there, and a nack brings back every unacknowledged message",
			slog.String("subscription_type", t.String()), slog.Int("max_deliveries", int(s.opts.Consumer.DLQ.MaxDeliveries)))
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c, ok := s.opts.Client.(*Client); ok {
		// The client's lines about the stage's consumers tell when they
		// cannot reconnect: the stage is degraded meanwhile.
		unwatch, _ := c.WatchReconnects(s.consumerName(st), st.Health())
		defer unwatch()
	}

	cs := make([]*consumer, 0, len(s.opts.Topics))
	for _, topic := range s.opts.Topics {
		c, err := s.subscribe(runCtx, st, topic, flow)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.retire(ctx, cs)
			return err
		}
		cs = append(cs, c)
	}

	var wg sync.WaitGroup
	for _, c := range cs {
		feed := st.NewFeed(c.name+"/"+c.topic, c.grant)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.receive(runCtx, feed, flow.MaxWindow()); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	err := context.Cause(runCtx)
	if err == nil {
		// Every receive loop ended without a reason: never "exhausted".
		err = &ConsumerError{Stage: st.Index(), Broker: s.broker, Subscription: s.opts.Subscription, Kind: ErrConsumerClosed}
	}
	// The producer stage logs err once, when it restarts the stage.
	s.retire(ctx, cs)
	return err
}

// subscribe creates the stage's consumer of topic, its receiver queue
// sized from the window and the topic's partitions (queuePlan). ctx ends
// the wait, not the client's calls: a consumer that subscribes after Run
// gave up is closed at once. A closed source subscribes nothing: the
// broker would keep the subscription, and its backlog, for nobody.
func (s *Source) subscribe(ctx context.Context, st *producer.Stage[[]byte], topic string, flow producer.Flow) (*consumer, error) {
	if liveset.Closed(&s.mu, &s.closed) {
		return nil, errSourceClosed
	}
	co := s.opts.Consumer
	co.Topic = topic
	co.SubscriptionName = s.opts.Subscription
	co.Type = s.opts.SubscriptionType.pulsar()
	co.Name = s.consumerName(st)
	if co.DLQ != nil {
		// pulsar-client-go fills in the policy's topics when RetryEnable
		// is set, writing through the pointer: each consumer gets a copy,
		// so that stages subscribing at once share nothing, and the
		// application's policy stays as it gave it.
		dlq := *co.DLQ
		co.DLQ = &dlq
	}
	log := st.Logger().With(slog.String("topic", topic))
	if co.NackBackoffPolicy == nil && co.EnableDefaultNackBackoffPolicy {
		co.NackBackoffPolicy = defaultNackBackoff{}
	}
	if co.NackBackoffPolicy != nil {
		co.NackBackoffPolicy = newNackPolicy(co.NackBackoffPolicy, co.NackRedeliveryDelay,
			log.With(slog.String("consumer", co.Name)))
	}
	// Unset, the client's 8 (256ms) would round the deadline of a nack
	// with a shorter first delay into the past.
	co.NackPrecisionBit = nackPrecisionBit(&co, log.With(slog.String("consumer", co.Name)))
	// Unbuffered: the client counts a message as consumed, towards its
	// next grant to the broker, when the source takes it.
	ch := make(chan pulsar.ConsumerMessage)
	co.MessageChannel = ch
	watch := NewCloseWatch()
	co.Interceptors = append(slices.Clip(co.Interceptors), watch)
	if dlq := co.DLQ; dlq != nil && dlq.MaxDeliveries > 0 {
		co.Interceptors = append(co.Interceptors, deadLetterCounter{n: &s.deadLettered, max: dlq.MaxDeliveries})
	}
	var events *listener
	if s.opts.ActiveStateCallback != nil {
		events = &listener{src: s, stage: st.Index(), log: st.Logger()}
		co.EventListener = events
	}

	type result struct {
		c    pulsar.Consumer
		plan queuePlan
	}
	began := time.Now()
	r, err := group.Await(ctx, &s.bg, s.opts.SubscribeTimeout, func() (result, error) {
		// Subscribe looks the partitions up first too: failing here is
		// failing to subscribe, with the same error.
		parts, err := s.opts.Client.TopicPartitions(topic)
		if err != nil {
			return result{}, err
		}
		plan := newQueuePlan(flow, len(parts))
		co.ReceiverQueueSize = plan.size
		c, err := s.opts.Client.Subscribe(co)
		return result{c, plan}, err
	}, func(r result) { r.c.Close() })
	switch {
	case err != nil && err == ctx.Err():
		return nil, err // the stage stops: a late consumer is closed
	case errors.Is(err, group.ErrAbandoned):
		// The client may never return (see Options.SubscribeTimeout).
		s.abandoned.Add(1)
		err = fmt.Errorf("%w (%s): %w", ErrSubscribeTimeout, s.opts.SubscribeTimeout, context.DeadlineExceeded)
	}
	if err != nil {
		if c, ok := s.opts.Client.(*Client); ok {
			if cause := c.last.since(began); cause != "" {
				err = fmt.Errorf("%w (the client's last connection failure: %s)", err, cause)
			}
		}
		return nil, &ConsumerError{Stage: st.Index(), Broker: s.broker, Topic: topic, Subscription: s.opts.Subscription, Kind: ErrSubscribe, Err: s.clean(err)}
	}
	c := &consumer{
		src:    s,
		stage:  st.Index(),
		topic:  topic,
		name:   co.Name,
		c:      r.c,
		ch:     ch,
		log:    log,
		events: events,
		plan:   r.plan,
		wake:   make(chan struct{}, 1),
		watch:  watch,
		acks:   newAckQueue(),
	}
	go c.sendAcks()
	// Logged before the consumer shows in Stats, so that whoever sees it
	// there finds the line in the log too.
	c.log.Debug("pulsar consumer subscribed", slog.String("consumer", c.name),
		slog.Int("receiver_queue_size", r.plan.size), slog.Int("reserve", r.plan.reserve))
	if !liveset.Add(&s.mu, &s.closed, s.live, c) {
		c.close()
		return nil, errSourceClosed
	}
	return c, nil
}

// errSourceClosed is what a stage run on a closed source fails with.
var errSourceClosed = fmt.Errorf("pulsar: source closed: %w", ErrSubscribe)

// sources numbers the sources of this process, for their consumer names.
var sources atomic.Uint64

// nameSuffix is 8 hex digits of a hash of the host name, the process id and
// the source's number in the process: the same for every consumer of one
// source, so that a restarted stage keeps its name, and different for
// another source or another process, such as a replica of the pipeline.
func nameSuffix(n uint64) string {
	host, _ := os.Hostname()
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%d\x00%d", host, os.Getpid(), n)
	return fmt.Sprintf("%08x", h.Sum32())
}

// consumerName names the stage's consumers: the stage name, then the
// source's suffix (Options.NameSuffix or nameSuffix),
// "<pipeline>.producer.<i>-<suffix>".
func (s *Source) consumerName(st *producer.Stage[[]byte]) string {
	return st.Name() + "-" + s.suffix
}

// deadLetterCounter counts the messages pulsar-client-go will route to the
// dead-letter topic: it sees every message the client queues, and the
// client routes those whose redelivery count reached MaxDeliveries
// (dlqRouter.shouldSendToDlq) instead of handing them to the source.
type deadLetterCounter struct {
	n   *atomic.Int64
	max uint32
}

func (d deadLetterCounter) BeforeConsume(m pulsar.ConsumerMessage) {
	if m.Message != nil && m.RedeliveryCount() >= d.max {
		d.n.Add(1)
	}
}

func (deadLetterCounter) OnAcknowledge(pulsar.Consumer, pulsar.MessageID) {}

func (deadLetterCounter) OnNegativeAcksSend(pulsar.Consumer, []pulsar.MessageID) {}

// retire closes the consumers of a failed stage run, so that their
// replacements can subscribe (an exclusive subscription admits one). The
// closes run on the background group and retire waits for them until ctx
// (Run's) ends: a stop does not wait for the broker to answer them, and
// Close waits for them within its own context.
func (s *Source) retire(ctx context.Context, cs []*consumer) {
	if len(cs) == 0 {
		return
	}
	liveset.Remove(&s.mu, s.live, cs...)
	// Gone before they count as replaced: an outcome that comes once
	// Stats shows them replaced is dropped, not queued for a consumer
	// that is closing.
	for _, c := range cs {
		c.gone.Store(true)
	}
	s.replaced.Add(int64(len(cs)))
	done := make(chan struct{})
	s.bg.Go(func() {
		defer close(done)
		closeAll(cs)
	})
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// closeAll closes every consumer of cs at once and returns when all are.
func closeAll(cs []*consumer) {
	_ = liveset.CloseEach(cs, func(c *consumer) error { c.close(); return nil })
}

// Close closes every consumer the source still has open, which first hands
// the client the acknowledgements still in the consumer's ack queue (giving
// up those the client does not take, see Ack) and then flushes those the
// client still groups, and waits for the subscribe
// calls that outlived their stage and for the closes of a failed stage's
// consumers that outlived its Run. It does not close the client. Closing a
// consumer waits for the client's own close request (bounded by
// ClientOptions.OperationTimeout). Close waits for those closes and for
// the subscribe calls until ctx ends, when it returns an error wrapping
// ctx.Err() and leaves them behind (a later Close waits for them again);
// a subscribe call abandoned after Options.SubscribeTimeout is not waited
// for.
// Otherwise it returns ctx.Err() if ctx expired meanwhile. A nil ctx
// returns ErrNilContext and leaves the source as it was, open: call Close
// again with a context.
func (s *Source) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	if s == nil {
		return nil
	}
	// The goroutine that closes the consumers joins s.bg before they are
	// taken: a Close that finds them taken by another one waits for it.
	taken := make(chan []*consumer, 1)
	s.bg.Go(func() { closeAll(<-taken) })
	taken <- liveset.Close(&s.mu, &s.closed, s.live)
	if err := s.bg.Wait(ctx); err != nil {
		return fmt.Errorf("pulsar: close: client calls still running: %w", err)
	}
	return ctx.Err()
}

// report calls the active-state callback, containing a panic, which it
// logs to log (the stage's logger).
func (s *Source) report(log *slog.Logger, stage int, active bool, c pulsar.Consumer, topic string) {
	base, part := splitPartition(topic)
	st := ActiveState{
		Active:       active,
		Topic:        topic,
		BaseTopic:    base,
		Partition:    part,
		Subscription: s.opts.Subscription,
		Stage:        stage,
		Consumer:     c,
	}
	// On a goroutine of its own: an exit (runtime.Goexit) in the callback
	// must not end the caller, the client's connection goroutine or the
	// stage's.
	err := panics.Isolate(func() (err error) {
		defer message.Recover(&err)
		s.opts.ActiveStateCallback(st)
		return nil
	}, func(stack []byte) error { return callbackExited(stack) })
	var pe *message.PanicError
	var exited callbackExited
	switch {
	case errors.As(err, &pe):
		s.callbackPanics.Add(1)
		err := &CallbackPanicError{State: st, Value: pe.Value, Stack: pe.Stack}
		log.Error("pulsar active state callback panicked; the consumer keeps running",
			slog.Any("error", err), slog.String("stack", string(err.Stack)))
	case errors.As(err, &exited):
		log.Error(CallbackExitedLog, slog.String("topic", topic), slog.Bool("active", active), slog.String("stack", string(exited)))
	}
}

// callbackExited is the stack of an active-state callback that ended its
// goroutine (runtime.Goexit).
type callbackExited []byte

func (callbackExited) Error() string { return CallbackExitedLog }

// CallbackExitedLog is the message of the error line the source logs when
// Options.ActiveStateCallback ends its goroutine (runtime.Goexit).
const CallbackExitedLog = "pulsar active state callback ended its goroutine (runtime.Goexit); the consumer keeps running"
