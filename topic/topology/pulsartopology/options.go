package pulsartopology

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// Defaults applied to zero fields of [Options].
const (
	// DefaultTenant and DefaultNamespace place the topics in Pulsar's
	// public/default namespace.
	DefaultTenant    = "public"
	DefaultNamespace = "default"
	// DefaultOperationTimeout is Options.OperationTimeout.
	DefaultOperationTimeout = 30 * time.Second
	// DefaultReadAhead is Options.ReadAhead.
	DefaultReadAhead = 1000
	// DefaultRedeliveryDelay is Options.RedeliveryDelay.
	DefaultRedeliveryDelay = time.Second
	// MaxReadAhead is the largest Options.ReadAhead, checked by Validate:
	// pulsar-client-go makes a queue of that many entries (24 MiB at the
	// bound) for every topic a reader's consumer reads.
	MaxReadAhead = 1 << 20
	// DefaultMaxMessageSize is Options.MaxMessageSize: Pulsar's default
	// maxMessageSize, 5 MiB.
	DefaultMaxMessageSize = 5 << 20
	// MinMaxMessageSize is the smallest Options.MaxMessageSize, checked by
	// Validate: under it, the room Publish keeps for a hold's and a
	// dead-lettering's properties (about 5 kB) would leave a letter
	// little or none.
	MinMaxMessageSize = 16 << 10
	// MaxMessageSizeLimit is the largest Options.MaxMessageSize, checked
	// by Validate: pulsar-client-go and the broker hold a message whole in
	// memory, and the client keeps the size the broker announces in an
	// int32.
	MaxMessageSizeLimit = 1 << 30
	// MaxRedeliveryDelay is the largest Options.RedeliveryDelay, checked
	// by Validate.
	MaxRedeliveryDelay = time.Hour
	// MaxReconnectToBrokerLimit is the largest
	// Options.MaxReconnectToBroker, checked by Validate.
	MaxReconnectToBrokerLimit = 1 << 16
)

// Options configure a [Backend]. Zero fields take the documented defaults.
type Options[T any] struct {
	// ServiceURL is the broker's service URL ("pulsar://127.0.0.1:6650").
	// Required unless Client is set (then it must be empty). It is never
	// shown with its user information: not in an error, a log line, nor
	// the options' or the backend's String form.
	ServiceURL string `validate:"required_without=Client,excluded_with=Client"`
	// Client is an existing pulsar-client-go client to use instead of one
	// made from ServiceURL. The backend shares it and never closes it.
	// Its readers report that they cannot reach the broker (so that
	// a topology source's stage is degraded) only when it was made by
	// sources/pulsar's NewClient without a ClientOptions.Logger; with any
	// other client they report nothing.
	Client pulsar.Client `name:"-" validate:"-"`
	// ClientOptions are passed to pulsar-client-go when the backend makes
	// its own client (authentication, TLS); URL must be empty. Zero
	// timeouts take sources/pulsar's bounded defaults, each at most a
	// quarter of OperationTimeout (ClientDefaultsWithin), so that the
	// client gives up on a broker it cannot reach before the backend
	// stops waiting for it and Close returns with none of its calls
	// running. Timeouts set are kept: set above that bound, a lookup may
	// go on retrying after Close returns, for up to the operation timeout.
	ClientOptions pulsar.ClientOptions `name:"-" validate:"-"`
	// Codec turns values into message payloads and back. Required.
	Codec topic.Codec[T] `validate:"required"`
	// Tenant and Namespace place the topics. Defaults "public" and
	// "default".
	Tenant    string `validate:"omitempty,excludesall=/ "`
	Namespace string `validate:"omitempty,excludesall=/ "`
	// OperationTimeout bounds each broker operation the backend waits for:
	// a Declare, a Subscribe (or SubscribeDead), a producer's creation, a
	// send's receipt, and a dead-letter reader's TryReceive catching up
	// with the DLQ, each also bounded by its own context. A client call
	// still running past it (pulsar-client-go can deadlock subscribing to
	// a partitioned topic, see the package documentation, Bounded calls)
	// is abandoned: its caller gets an error wrapping ErrAbandoned, one
	// ERROR line is logged, Close no longer waits for it, and what it
	// makes if it ever returns is closed. Keep it above the time the
	// client takes to give up on its own, about ConnectionTimeout + 2 ×
	// OperationTimeout of ClientOptions (19 s with sources/pulsar's
	// defaults; for an Options.Client made by pulsar.NewClient with its
	// defaults, above this option's default: 60 s plus a dial the client
	// does not bound, which the system ends, after about 2 minutes on
	// Linux, against a host that does not answer). Default 30s; at most 1
	// hour.
	OperationTimeout time.Duration `validate:"gte=0,lte=1h"`
	// ReadAhead is the receiver queue of each reader's consumer: how many
	// messages the broker may push ahead of Receive, per topic read.
	// Default 1000 (pulsar-client-go's own default), at most MaxReadAhead
	// (1048576).
	ReadAhead int `validate:"gte=0,lte=1048576"`
	// RedeliveryDelay is how long a received letter whose hand-off failed
	// (its Hold, Requeue or DeadLetter returned an error) waits before the
	// broker delivers it to the group again: Settle negatively
	// acknowledges it instead of acknowledging it (a dead-letter reader's
	// comes back after 100ms). A topology Source settles no such letter
	// but one whose hand-off failed as the backend or the source closed:
	// it keeps the others and hands them off again until the broker takes
	// them. Default 1s; 0 means the default, and a
	// delay set must be at least 1ms (pulsar-client-go cannot tick
	// shorter). The backend gives the client a nack precision within the
	// delay (the client's 256ms, or a finer one for a shorter delay), so
	// that a letter waits for more than the delay less that precision.
	// At most MaxRedeliveryDelay (1h).
	RedeliveryDelay time.Duration `validate:"omitempty,gte=1ms,lte=1h"`
	// MaxMessageSize is the largest message the broker takes, in bytes: it
	// must match the brokers' maxMessageSize setting, which they announce
	// to the client but pulsar-client-go does not expose. Publish keeps
	// room under it for the properties a hold or a dead-lettering adds to
	// a letter's message, and refuses a larger letter with a
	// *LetterTooLargeError (see the package documentation, Mapping). Set
	// larger than the brokers', a letter that could not be held or
	// dead-lettered is taken; set smaller, letters the topology could
	// carry are refused. Default DefaultMaxMessageSize (5 MiB, Pulsar's
	// default), from MinMaxMessageSize (16384) to MaxMessageSizeLimit
	// (1073741824).
	MaxMessageSize int `validate:"gte=16384,lte=1073741824"`
	// Admin reads the message TTL in effect on the hold topics and the
	// DLQ at each Declare, which then refuses a hold not shorter than its
	// topic's TTL (a *TTLError wrapping ErrHoldOutlastsTTL: the broker
	// would drop held letters before they fall due) and logs a WARN for a
	// DLQ with a TTL. When Admin is also an EvictionAdmin, Declare reads
	// the backlog quotas and subscription expiration in effect on them
	// too, and refuses (an *EvictionError wrapping ErrEvictionPolicy) a
	// backlog quota with policy consumer_backlog_eviction (unless
	// AcceptBacklogEviction, which does not accept every one) and a
	// subscription expiration on the DLQ
	// (its subscription DeadSubscription has no consumer between
	// replays); it logs a WARN for a hold topic whose subscriptions
	// expire. When a policy cannot be read (the admin API refuses or is
	// down), Declare logs one WARN in the backend's life and goes on. Its
	// calls get Declare's context, ended too when Close is called. Nil,
	// the default, checks nothing: see docs/topology.md for the policies
	// to set on the namespace.
	Admin Admin `name:"-" validate:"-"`
	// AcceptBacklogEviction lets Declare accept a backlog quota with
	// policy consumer_backlog_eviction on a hold topic or the DLQ, the
	// operator having sized the quota for the most they may hold. By
	// default, with an Admin that is an EvictionAdmin, Declare refuses
	// one (an *EvictionError wrapping ErrEvictionPolicy): the broker drops
	// the oldest unacknowledged letters of a subscription over its quota,
	// however young, so a burst of retries or dead letters loses letters
	// before they are released or replayed. It does not accept a
	// message_age quota on a hold topic whose hold is at least 90% of its
	// limitTime: the age counts from the hold's publish, so no sizing keeps
	// the broker from dropping the held letters before they fall due
	// (EvictionError.Hold). Under an accepted message_age quota, a letter
	// of a shorter hold is lost only when no reader takes it within 90% of
	// limitTime of the hold's publish (that is, within 90% of limitTime
	// less the hold after it falls due) and the broker's check finds the
	// topic's oldest unacknowledged message older than limitTime.
	AcceptBacklogEviction bool
	// MaxReconnectToBroker is how many attempts in a row a reader's
	// consumer makes to reconnect after losing its connection before
	// pulsar-client-go gives up on it and closes it: its Receive and
	// TryReceive then fail with an error wrapping ErrConsumerClosed, and a
	// topology source's next run subscribes a new reader. It is passed to
	// every reader's pulsar.ConsumerOptions.MaxReconnectToBroker (group,
	// broadcast and dead-letter readers alike), as the field of that name
	// in the Pulsar source's ConsumerOptions is. 0, the default (the
	// client's), reconnects for ever; a value set must be at least 1 (the
	// client would take 0 for never reconnecting and keep the consumer
	// open: its reader would neither receive nor fail). At most
	// MaxReconnectToBrokerLimit (65536).
	MaxReconnectToBroker int `validate:"gte=0,lte=65536"`
	// Logger receives one line per event (a message that does not decode)
	// and, for a client the backend makes, pulsar-client-go's logs. Nil
	// means slog.Default().
	Logger *slog.Logger `name:"-" validate:"-"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options[T]) WithDefaults() Options[T] {
	if o.Tenant == "" {
		o.Tenant = DefaultTenant
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.OperationTimeout == 0 {
		o.OperationTimeout = DefaultOperationTimeout
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = DefaultReadAhead
	}
	if o.RedeliveryDelay == 0 {
		o.RedeliveryDelay = DefaultRedeliveryDelay
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate checks o (after WithDefaults) and returns nil or a
// validate.Errors naming every broken rule ("pulsartopology.codec is
// required").
func (o Options[T]) Validate() error {
	errs := []error{validate.Struct("pulsartopology", &o)}
	if o.ClientOptions.URL != "" {
		errs = append(errs, validate.Field("pulsartopology.clientOptions.url", "owned",
			"must be empty; use pulsartopology.serviceURL"))
	}
	return validate.Join(errs...)
}

// String describes the options without anything that can hold a
// credential: the service URL with its user information redacted, and
// whether a client and an authentication are set, never what they hold.
// %v, %+v, %#v, %s and %q all print this.
func (o Options[T]) String() string {
	return fmt.Sprintf("pulsartopology.Options{serviceURL: %q, client: %t, authentication: %t, admin: %t, tenant: %q, namespace: %q, operationTimeout: %s, readAhead: %d, redeliveryDelay: %s, maxMessageSize: %d, maxReconnectToBroker: %d}",
		spulsar.RedactServiceURL(o.ServiceURL), o.Client != nil, o.ClientOptions.Authentication != nil, o.Admin != nil, o.Tenant, o.Namespace,
		o.OperationTimeout, o.ReadAhead, o.RedeliveryDelay, o.MaxMessageSize, o.MaxReconnectToBroker)
}

// GoString is String, so that %#v shows no credential either.
func (o Options[T]) GoString() string { return o.String() }

// Format writes String for every verb (%q quotes it), so that no verb
// reaches the service URL or the client options.
func (o Options[T]) Format(f fmt.State, verb rune) {
	s := o.String()
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = fmt.Fprint(f, s)
}

// LogValue logs what String shows.
func (o Options[T]) LogValue() slog.Value { return slog.StringValue(o.String()) }

// MarshalJSON encodes String, so that no encoder reaches the service
// URL's user information or the client options.
func (o Options[T]) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }
