package pulsar

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/pulsarnack"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// SubscriptionType is the kind of Pulsar subscription the source's consumers
// join. Its zero value is Shared, the default, so that several producer
// stages can consume one topic side by side.
type SubscriptionType uint8

const (
	// Shared spreads the messages of a topic over every consumer of the
	// subscription (the default).
	Shared SubscriptionType = iota
	// Exclusive lets one consumer alone attach to the subscription: with
	// producer concurrency above 1 the other stages fail to subscribe and
	// keep restarting.
	Exclusive
	// Failover makes one consumer per topic or partition active and the
	// others standby; Options.ActiveStateCallback reports the changes.
	Failover
	// KeyShared spreads messages over consumers by key: one key, one
	// consumer at a time.
	KeyShared
)

// String returns "shared", "exclusive", "failover" or "key_shared".
func (t SubscriptionType) String() string {
	switch t {
	case Shared:
		return "shared"
	case Exclusive:
		return "exclusive"
	case Failover:
		return "failover"
	case KeyShared:
		return "key_shared"
	}
	return fmt.Sprintf("SubscriptionType(%d)", uint8(t))
}

func (t SubscriptionType) pulsar() pulsar.SubscriptionType {
	switch t {
	case Exclusive:
		return pulsar.Exclusive
	case Failover:
		return pulsar.Failover
	case KeyShared:
		return pulsar.KeyShared
	}
	return pulsar.Shared
}

// keyed reports whether the broker keeps an order on the subscription
// type that the source passes on as partition keys: per key on KeyShared,
// per topic or partition on Exclusive and Failover.
func (t SubscriptionType) keyed() bool { return t != Shared }

// ActiveState is one report of a failover consumer becoming active or
// passive for a topic or partition, as the broker announced it.
type ActiveState struct {
	// Active is true when the consumer became the active one, false when it
	// became passive (standby).
	Active bool
	// Topic is the topic whose state changed: for a partitioned topic, the
	// individual partition's topic.
	Topic string
	// BaseTopic is Topic without its partition suffix (fully qualified, as
	// the client names topics).
	BaseTopic string
	// Partition is the partition index, or -1 when the topic is not
	// partitioned.
	Partition int32
	// Subscription is the subscription name.
	Subscription string
	// Stage is the index of the producer stage that owns the consumer.
	Stage int
	// Consumer is the underlying pulsar-client-go consumer. Track ownership
	// by this value, not by topic alone: with producer concurrency above 1
	// several consumers report on the same topic. Do not close it; the
	// source owns it.
	Consumer pulsar.Consumer
}

// Options configure a Source. The zero value of every optional field takes
// the default documented on it; New does not validate, Validate (called by
// pipeline.New) and Run do.
//
// The permit window is not among them: it is the pipeline's
// producer.Options.Flow (default 100/50/50), which the source maps onto each
// consumer's ReceiverQueueSize and enforces with one feed per consumer.
type Options struct {
	// Client is the pulsar-client-go client the consumers are created on.
	// Required. The source shares it and never closes it: create it before
	// the pipeline and close it after the pipeline has stopped.
	Client pulsar.Client `validate:"required"`
	// Topics are the topics to consume. Required, non-empty, no duplicates,
	// no empty names, each a name pulsar-client-go parses ("name",
	// "tenant/ns/name", "persistent://tenant/ns/name", …). Each producer stage subscribes one consumer per topic
	// (for a partitioned topic, that consumer covers every partition).
	Topics []string `validate:"required,min=1,unique,dive,required"`
	// Subscription is the subscription name. Required.
	Subscription string `validate:"required"`
	// SubscriptionType is the kind of subscription. Default Shared.
	SubscriptionType SubscriptionType `validate:"lte=3"`
	// Unordered relaxes the order the subscription type gives: messages
	// are balanced over all processors instead of each key (KeyShared) or
	// partition (Exclusive, Failover) going to one processor in delivery
	// order (see Source.Info). The source still sets the messages'
	// partition keys. Default false. A Shared subscription is unordered
	// whatever it says.
	Unordered bool
	// Consumer holds any other pulsar-client-go consumer option, applied to
	// every consumer the source creates (for example
	// SubscriptionInitialPosition, NackRedeliveryDelay, DLQ,
	// EnableBatchIndexAcknowledgment, KeySharedPolicy, AckGroupingOptions).
	// A NackRedeliveryDelay set must be at least 1ms (0 is the client's
	// default, 1 minute). A NackBackoffPolicy is called through the
	// source: a delay it returns below 1ms (zero or negative included)
	// counts as 1ms, since pulsar-client-go ticks every third of the delay
	// and cannot tick shorter; a panic in it is recovered and logged as one
	// error line on the stage's logger, and the message then waits
	// NackRedeliveryDelay (or the client's 1 minute when that is 0).
	// EnableDefaultNackBackoffPolicy without a policy gets the client's
	// default backoff (1s doubled per redelivery, at most 10 minutes),
	// computed by the source for every redelivery count (the client's own
	// overflows from a count of 34). Each consumer gets a copy of DLQ.
	// NackPrecisionBit: the client rounds each nack deadline down to a
	// multiple of 2^bit ms, so with 2^bit ms above the first nack delay
	// (NackRedeliveryDelay, or the backoff policy's delay for a
	// redelivery count of 0) deadlines fall at or before the nack and
	// nacked messages come back at once; within it, every nack waits more
	// than the delay less 2^bit ms. Validate refuses a bit set above the
	// first delay (it asks a policy for Next(0) only: a policy whose later
	// delays are shorter is the application's to keep above 2^bit ms).
	// Unset, the source gives the client its default, 8 (256ms), or, for
	// a first delay under 256ms, the largest bit within it.
	// Validate refuses what the client would refuse at every subscribe: a
	// DLQ with MaxDeliveries 0 or, without RetryEnable, no
	// DeadLetterTopic; a PriorityLevel outside 0 to math.MaxInt32; a
	// negative NackPrecisionBit; a negative ExpireTimeOfIncompleteChunk
	// (the client would discard and acknowledge every chunked message as
	// it begins); and a MaxPendingChunkedMessage outside 0 to
	// MaxPendingChunkedMessageLimit (the client reserves a table of that
	// many entries in every partition consumer, and takes a negative
	// value for no limit). The
	// fields the source sets itself must be left zero, or Validate rejects
	// them: Topic, Topics, TopicsPattern, SubscriptionName, Type, Name,
	// EventListener, MessageChannel, ReceiverQueueSize,
	// EnableZeroQueueConsumer, EnableAutoScaledReceiverQueueSize.
	// Interceptors are kept and called first: the source adds its own after
	// them, to learn when a consumer closes and to count dead letters.
	Consumer pulsar.ConsumerOptions `validate:"-"`
	// ActiveStateCallback, when set, receives every active/passive change
	// the broker reports for a Failover subscription's consumers. It is only
	// allowed with SubscriptionType Failover. The client's connection
	// goroutine waits for it, so it must return promptly; it runs on a
	// goroutine of its own. A panic in it is recovered, logged at error
	// level as a *CallbackPanicError and counted in
	// Stats().CallbackPanics; an end of its goroutine (runtime.Goexit) is
	// logged at error level with CallbackExitedLog and the stack; either
	// way the consumer keeps running. Reports
	// are observations, not a lock: the same state may be reported twice and
	// a consumer that closes need not report passive first.
	ActiveStateCallback func(ActiveState) `validate:"-"`
	// NameSuffix ends the name of every consumer the source creates,
	// "<pipeline>.producer.<i>-<NameSuffix>". Default: 8 hex digits derived
	// from the host name, the process id and the source's number in the
	// process, so that the consumers of two processes (replicas of one
	// pipeline) or of two sources never share a name, and a restarted stage
	// keeps its own. A failover subscription picks its active consumer by
	// name: set a suffix that stays the same across process restarts (the
	// host name, a replica number) for a choice that survives them too. At
	// most 64 printable characters, no spaces.
	NameSuffix string `validate:"omitempty,max=64,printascii,excludes= "`
	// SubscribeTimeout bounds a stage's wait for the client to subscribe
	// one of its consumers (the partition lookup and the subscribe of
	// every partition). Past it the stage fails with an error wrapping
	// ErrSubscribe and ErrSubscribeTimeout, and the pipeline restarts it
	// with a new consumer; the client's call is left behind (counted in
	// Stats().SubscribesAbandoned), and a consumer it returns later is
	// closed. The client bounds its own requests by
	// ClientOptions.OperationTimeout, but pulsar-client-go can deadlock a
	// subscribe to a partitioned topic whose connection drops while one
	// partition is subscribed and another is not yet (docs/pulsar.md,
	// Consumer ownership and failure): without this bound the stage would
	// wait for ever. A client (a fake one, in a test) whose lookup or
	// subscribe ends its goroutine (runtime.Goexit, as t.FailNow does)
	// fails the subscribe at once, with ErrSubscribe, without waiting.
	// Set it above the time the client takes to give up on its own:
	// about ConnectionTimeout + 2 × OperationTimeout (19 s with
	// NewClient's defaults; with pulsar-client-go's, 60 s plus a dial it
	// does not bound, which the system ends, after about 2 minutes on
	// Linux, against a host that does not answer). Default
	// DefaultSubscribeTimeout; at most 1 hour.
	SubscribeTimeout time.Duration `validate:"gte=0,lte=1h"`
	// Logger is ignored: the source logs through its producer stage's
	// logger (the pipeline's Logger, annotated with the stage; nil there
	// means slog.Default()). To route pulsar-client-go's own logs to the
	// same place, create the client with NewClient or ClientLogger.
	//
	// Deprecated: set the pipeline's Logger instead.
	Logger *slog.Logger `name:"-" validate:"-"`
}

// MaxPendingChunkedMessageLimit is the largest
// Options.Consumer.MaxPendingChunkedMessage Validate accepts: the chunked
// messages a partition consumer may be assembling at once. pulsar-client-go
// reserves a table of that many entries in every partition consumer it
// makes (about 3 MiB at the limit; its default, 100, a few KiB), so
// an unbounded value would be reserved once per partition and per stage.
const MaxPendingChunkedMessageLimit = 1 << 16

// DefaultSubscribeTimeout is Options.SubscribeTimeout's default.
const DefaultSubscribeTimeout = 90 * time.Second

// WithDefaults returns o with a zero SubscribeTimeout set to
// DefaultSubscribeTimeout. Every other field's default is its zero value,
// but for NameSuffix, whose default the source derives when it is created
// (see NameSuffix), not here.
func (o Options) WithDefaults() Options {
	if o.SubscribeTimeout == 0 {
		o.SubscribeTimeout = DefaultSubscribeTimeout
	}
	return o
}

// String describes the options without anything that can hold a
// credential: the client shows as its redacted service URL (for one made
// by NewClient) or as "set", and of the consumer options only the
// subscription settings the source reads.
func (o Options) String() string {
	client := clientName(o.Client)
	return fmt.Sprintf("pulsar.Options{client: %s, topics: %q, subscription: %q, subscriptionType: %v, unordered: %t, dlq: %t, activeStateCallback: %t, subscribeTimeout: %v}",
		client, o.Topics, o.Subscription, o.SubscriptionType, o.Unordered, o.Consumer.DLQ != nil, o.ActiveStateCallback != nil, o.SubscribeTimeout)
}

// GoString is String, so that %#v shows no credential either.
func (o Options) GoString() string { return o.String() }

// Format writes String for every verb (%q quotes it), so that no verb
// reaches the client's or the consumer options' internals.
func (o Options) Format(f fmt.State, verb rune) { redact.Format(f, verb, o.String()) }

// LogValue logs what String shows, as a group.
func (o Options) LogValue() slog.Value {
	client := clientName(o.Client)
	return slog.GroupValue(
		slog.String("client", client),
		slog.Any("topics", o.Topics),
		slog.String("subscription", o.Subscription),
		slog.String("subscription_type", o.SubscriptionType.String()),
		slog.Bool("unordered", o.Unordered),
		slog.Bool("dlq", o.Consumer.DLQ != nil),
		slog.Duration("subscribe_timeout", o.SubscribeTimeout),
	)
}

// Validate checks the options and returns every broken rule at once, as a
// validate.Errors naming each field under "pulsar.", for example
// "pulsar.topics is required" or "pulsar.consumer.topic is set by the
// source; use pulsar.topics".
func (o Options) Validate() error {
	errs := []error{validate.Struct("pulsar", &o)}
	owned := func(field, what string) {
		errs = append(errs, validate.Field("pulsar.consumer."+field, "owned", "is set by the source; "+what))
	}
	c := &o.Consumer
	if c.Topic != "" {
		owned("topic", "use pulsar.topics")
	}
	if len(c.Topics) > 0 {
		owned("topics", "use pulsar.topics")
	}
	if c.TopicsPattern != "" {
		owned("topicsPattern", "list the topics in pulsar.topics")
	}
	if c.SubscriptionName != "" {
		owned("subscriptionName", "use pulsar.subscription")
	}
	if c.Type != pulsar.Exclusive {
		owned("type", "use pulsar.subscriptionType")
	}
	if c.Name != "" {
		owned("name", "consumers are named after their producer stage; use pulsar.nameSuffix")
	}
	if c.EventListener != nil {
		owned("eventListener", "use pulsar.activeStateCallback")
	}
	if c.MessageChannel != nil {
		owned("messageChannel", "the source reads each consumer's messages itself")
	}
	if c.ReceiverQueueSize != 0 {
		owned("receiverQueueSize", "it is derived from the producer flow window (producer.flow) and the topic's partitions; leave it zero")
	}
	if c.EnableZeroQueueConsumer {
		owned("enableZeroQueueConsumer", "the permit window needs a receiver queue")
	}
	if c.EnableAutoScaledReceiverQueueSize {
		owned("enableAutoScaledReceiverQueueSize", "the receiver queue is sized from the producer flow window")
	}
	// pulsar-client-go ticks every third of the delay, and its ticker
	// panics below 3ns (so does a negative delay).
	if d := c.NackRedeliveryDelay; d != 0 && d < minNackDelay {
		errs = append(errs, validate.Field("pulsar.consumer.nackRedeliveryDelay", "gte",
			"must be 0 (the client's default, 1 minute) or at least 1ms"))
	}
	for i, t := range o.Topics {
		if t == "" {
			continue // reported as required
		}
		if why := topicNameProblem(t); why != "" {
			errs = append(errs, validate.Field(fmt.Sprintf("pulsar.topics[%d]", i), "topic",
				fmt.Sprintf("is not a topic name pulsar-client-go accepts (%q: %s)", t, why)))
		}
	}
	// pulsar-client-go refuses these when it subscribes: every stage would
	// fail the same way at each restart, so they are refused here first.
	if d := c.DLQ; d != nil {
		if d.MaxDeliveries == 0 {
			errs = append(errs, validate.Field("pulsar.consumer.dlq.maxDeliveries", "gt",
				"must be above 0 with a DLQ policy (the deliveries a message gets before it goes to the dead-letter topic)"))
		}
		if d.DeadLetterTopic == "" && !c.RetryEnable {
			errs = append(errs, validate.Field("pulsar.consumer.dlq.deadLetterTopic", "required",
				"is required with a DLQ policy"))
		}
	}
	if c.PriorityLevel < 0 || c.PriorityLevel > math.MaxInt32 {
		errs = append(errs, validate.Field("pulsar.consumer.priorityLevel", "range",
			"must be between 0 and 2147483647"))
	}
	// pulsar-client-go reads 0 as "never reconnect" but then neither
	// reconnects nor closes the consumer: the stage would read nothing and
	// never fail.
	if m := c.MaxReconnectToBroker; m != nil && *m == 0 {
		errs = append(errs, validate.Field("pulsar.consumer.maxReconnectToBroker", "gte",
			"must be nil (reconnect for ever, the client's default) or at least 1: with 0 the client neither reconnects a consumer nor closes it"))
	}
	if b := c.NackPrecisionBit; b != nil && *b < 0 {
		errs = append(errs, validate.Field("pulsar.consumer.nackPrecisionBit", "gte", "must be at least 0"))
	} else if err := nackPrecisionProblem(c); err != nil {
		errs = append(errs, err)
	}
	// The client discards, and acknowledges, a chunked message still
	// incomplete after this long: a negative value would discard every
	// chunked message at once.
	// The client sizes a map by it in every partition consumer it makes
	// (about 53 bytes an entry), and takes a negative value for no limit
	// on the chunked messages it keeps assembling.
	if n := c.MaxPendingChunkedMessage; n < 0 || n > MaxPendingChunkedMessageLimit {
		errs = append(errs, validate.Field("pulsar.consumer.maxPendingChunkedMessage", "range",
			fmt.Sprintf("must be 0 (the client's default, 100) or 1 to %d", MaxPendingChunkedMessageLimit)))
	}
	if c.ExpireTimeOfIncompleteChunk < 0 {
		errs = append(errs, validate.Field("pulsar.consumer.expireTimeOfIncompleteChunk", "gte",
			"must be 0 (the client's default, 1 minute) or positive"))
	}
	if o.ActiveStateCallback != nil && o.SubscriptionType != Failover {
		errs = append(errs, validate.Field("pulsar.activeStateCallback", "failover",
			"needs pulsar.subscriptionType Failover (it is "+o.SubscriptionType.String()+")"))
	}
	return validate.Join(errs...)
}

// firstNackDelay is the delay the client gives the first nack of a
// message (redelivery count 0) under c, and how an error names it. A
// NackBackoffPolicy is called through nackPolicy, as the source calls it,
// with log receiving a panic (the NackRedeliveryDelay then applies); a
// policy that is a *nackPolicy already is called as it is.
func firstNackDelay(c *pulsar.ConsumerOptions, log *slog.Logger) (time.Duration, string) {
	switch p := c.NackBackoffPolicy; {
	case p != nil:
		if _, ok := p.(*nackPolicy); !ok {
			p = newNackPolicy(p, c.NackRedeliveryDelay, log)
		}
		return p.Next(0), "nackBackoffPolicy.Next(0)"
	case c.EnableDefaultNackBackoffPolicy:
		return defaultNackBackoff{}.Next(0), "the default nack backoff's"
	case c.NackRedeliveryDelay == 0:
		return clientNackDelay, "the client's default nackRedeliveryDelay"
	}
	return c.NackRedeliveryDelay, "nackRedeliveryDelay"
}

// nackPrecisionProblem refuses a NackPrecisionBit set above
// pulsarnack.MaxBit of the first nack delay, or returns nil.
func nackPrecisionProblem(c *pulsar.ConsumerOptions) error {
	if c.NackPrecisionBit == nil {
		return nil // the source chooses it (nackPrecisionBit)
	}
	if d := c.NackRedeliveryDelay; c.NackBackoffPolicy == nil && d != 0 && d < minNackDelay {
		return nil // refused as nackRedeliveryDelay
	}
	d, name := firstNackDelay(c, slog.New(slog.DiscardHandler))
	most := pulsarnack.MaxBit(d)
	if *c.NackPrecisionBit <= most {
		return nil
	}
	return validate.Field("pulsar.consumer.nackPrecisionBit", "precision", fmt.Sprintf(
		"must be at most %d (2^bit ms at most %v, the first nack delay, %s; or unset): the client rounds each nack deadline down to a multiple of 2^bit ms, and a coarser precision brings a nacked message back at once",
		most, d, name))
}

// nackPrecisionBit is the NackPrecisionBit the source gives the client for
// c: the one c sets, else the client's default, 8, or, when the first nack
// delay is under 256ms, the largest bit that keeps it (2^bit ms at most
// the delay). log receives a panic of c's NackBackoffPolicy.
func nackPrecisionBit(c *pulsar.ConsumerOptions, log *slog.Logger) *int64 {
	if c.NackPrecisionBit != nil {
		return c.NackPrecisionBit
	}
	d, _ := firstNackDelay(c, log)
	return pulsarnack.Bit(d)
}

// topicNameProblem says why pulsar-client-go (v0.21.0, its
// internal.ParseTopicName) would refuse topic, or returns "": a short name
// is "<topic>", "<tenant>/<namespace>/<topic>" or
// "<tenant>/<cluster>/<namespace>/<topic>"; a full one is
// "persistent://" or "non-persistent://" and three or four parts; a name
// holding "-partition-" ends with a number after its last "-".
func topicNameProblem(topic string) string {
	name := topic
	if !strings.Contains(name, "://") {
		switch strings.Count(name, "/") {
		case 0:
			name = "persistent://public/default/" + name
		case 2, 3:
			name = "persistent://" + name
		default:
			return "a short name is <topic> or <tenant>/<namespace>/<topic>"
		}
	}
	domain, rest, _ := strings.Cut(name, "://")
	if domain != "persistent" && domain != "non-persistent" {
		return "the domain must be persistent or non-persistent"
	}
	if n := len(strings.SplitN(rest, "/", 4)); n != 3 && n != 4 {
		return "a full name is <domain>://<tenant>/<namespace>/<topic>"
	}
	if strings.Contains(name, partitionSuffix) {
		if _, err := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:]); err != nil {
			return "a name holding " + strconv.Quote(partitionSuffix) + " must end with a partition number"
		}
	}
	return ""
}

// validateFlow checks the window a stage hands the source with the producer
// package's own rules, for a source started outside a pipeline.
func validateFlow(f producer.Flow) error {
	return validate.Struct("producer.flow", &f)
}

// queuePlan is how a consumer of a topic with parts partitions shares the
// producer's window with pulsar-client-go.
//
// The client grants the broker its ReceiverQueueSize (size) when a
// partition consumer connects and, each time max(size/2, 1) messages have
// moved from its queue into the source's unbuffered channel, grants that
// many again: so the broker is never owed more than size messages per
// partition beyond what the source took. Those messages, pushed to the
// client or about to be, are the reserve: the source counts them against
// the window, taking a message only while what it took and has not left
// the stage, plus the reserve, stays within Flow.MaxWindow(). The broker
// then never hands out more than the window beyond what left the stage.
//
// The reserve is at most the share: half the window (at least one), so
// that the stage buffer can still hold the other half while the client
// asks the broker for messages in grants of up to a quarter of the window
// (each grant is a FLOW round trip, so larger grants keep the broker
// busy), and at most MaxWindow - Threshold - 1, so that whenever the feed
// refills (its remaining permits fell to Threshold) the source has room
// to take again: it waits for a refill or an acknowledgement, never for a
// timer. A topic with more partitions than the share still needs one
// message per partition; its gate then counts only the share, and the
// broker can be owed parts - share more.
type queuePlan struct {
	size    int // ReceiverQueueSize, per partition consumer
	window  int // Flow.MaxWindow()
	reserve int // what the gate counts for the client: min(parts × size, share)
}

func newQueuePlan(f producer.Flow, parts int) queuePlan {
	w := f.MaxWindow()
	budget := max(0, w-f.Threshold-1)
	share := min(budget, max(1, w/2))
	parts = max(parts, 1)
	size := max(1, share/parts)
	// The client's queue is never smaller than 1: with no budget above
	// Threshold (Threshold = window - 1) it is still counted, or the broker
	// could hand out one message per partition beyond the window. The
	// source then waits for a message to leave the stage before it takes
	// the last permit of a refill.
	return queuePlan{size: size, window: w, reserve: min(parts*size, max(share, 1))}
}

// room is how many messages the source may take now, having taken held
// that have not left the stage.
func (p queuePlan) room(held int) int { return p.window - p.reserve - held }

// clientName is how options show their client: its redacted service URL
// when it has one (a *Client), "set" or "<nil>" otherwise.
func clientName(c pulsar.Client) string {
	if c == nil {
		return "<nil>"
	}
	if u, ok := c.(interface{ ServiceURL() string }); ok {
		return redact.URL(u.ServiceURL())
	}
	return "set"
}
