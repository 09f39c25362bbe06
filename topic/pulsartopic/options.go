package pulsartopic

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	spulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// Defaults of [Options].
const (
	// DefaultTenant is the tenant of Pulsar's public/default namespace.
	DefaultTenant = "public"
	// DefaultNamespace is the namespace of Pulsar's public/default
	// namespace.
	DefaultNamespace = "default"
	// DefaultMaxPendingMessages is the producer's pending queue: publishes
	// sent and not yet confirmed by the broker (pulsar-client-go's own
	// default).
	DefaultMaxPendingMessages = 1000
	// DefaultSendTimeout bounds the wait for the broker's receipt of one
	// publish (pulsar-client-go's own default).
	DefaultSendTimeout = 30 * time.Second
	// DefaultNackRedeliveryDelay is how long a nacked message waits before
	// the broker delivers it again. pulsar-client-go's own default is one
	// minute; a topic nack asks for a prompt retry.
	DefaultNackRedeliveryDelay = time.Second
	// DefaultAdminTimeout bounds one topic declaration (the partition
	// metadata lookup and, when needed, Admin.CreatePartitionedTopic). A
	// quarter of it is above sources/pulsar's client timeouts, so that the
	// backend's own client keeps them (see Options.ClientOptions).
	DefaultAdminTimeout = 30 * time.Second
	// DefaultSubscribeTimeout is Options.SubscribeTimeout: sources/pulsar's
	// default for the same bound.
	DefaultSubscribeTimeout = spulsar.DefaultSubscribeTimeout
	// MaxPartitions is the largest partition count Options.Partitions
	// accepts.
	MaxPartitions = 4096
	// MaxPendingSlots is the largest Options.MaxPendingMessages ×
	// max(Options.Partitions, 1). pulsar-client-go gives every partition's
	// producer a pending queue of MaxPendingMessages entries, allocated
	// when the topic is declared (about 24 bytes an entry), so the product
	// is what the pending queues of one topic reserve: at most about 24 MiB.
	MaxPendingSlots = 1 << 20
	// MaxSendTimeout is the largest Options.SendTimeout.
	MaxSendTimeout = time.Hour
	// MaxBatchingMaxPublishDelay is the largest
	// Options.BatchingMaxPublishDelay.
	MaxBatchingMaxPublishDelay = time.Hour
	// MaxNackRedeliveryDelay is the largest Options.NackRedeliveryDelay,
	// as in package kafkatopic.
	MaxNackRedeliveryDelay = time.Hour
	// MaxReconnectToBrokerLimit is the largest
	// Options.MaxReconnectToBroker.
	MaxReconnectToBrokerLimit = 1 << 16
)

// Admin creates partitioned topics. A Pulsar client cannot create a
// partitioned topic over the binary protocol (a non-partitioned one is
// created on first use); a broker's admin REST API can, for example with
// pulsar-client-go's pulsaradmin package:
//
//	admin.Topics().Create(*utils.GetTopicName(topic), partitions)
type Admin interface {
	// CreatePartitionedTopic creates topic (a full name,
	// persistent://tenant/namespace/local) with that many partitions.
	CreatePartitionedTopic(ctx context.Context, topic string, partitions int) error
}

// AdminFunc is an [Admin] made of a function.
type AdminFunc func(ctx context.Context, topic string, partitions int) error

// CreatePartitionedTopic calls f.
func (f AdminFunc) CreatePartitionedTopic(ctx context.Context, topic string, partitions int) error {
	return f(ctx, topic, partitions)
}

// Options configure a [Backend]. Zero fields take the defaults documented
// on them; [New] applies them and validates.
type Options[T any] struct {
	// ServiceURL is the broker's service URL, for example
	// "pulsar://127.0.0.1:6650" or "pulsar+ssl://broker:6651". Required
	// unless Client is set (then it must be empty). It is never shown in an
	// error or a log line with its user information.
	ServiceURL string `validate:"required_without=Client,excluded_with=Client"`
	// Client is an existing pulsar-client-go client to use instead of one
	// made from ServiceURL. The backend shares it and never closes it.
	// Its subscriptions report that they cannot reach the broker (so that
	// a topic source's stage is degraded) only when it was made by
	// sources/pulsar's NewClient without a ClientOptions.Logger; with any
	// other client they report nothing.
	Client pulsar.Client `validate:"-"`
	// ClientOptions are passed to pulsar-client-go when the backend makes
	// its own client: authentication (pulsar.NewAuthenticationToken, TLS
	// certificates, OAuth2), TLS trust settings, timeouts. URL must be
	// left empty (ServiceURL sets it). Connection, operation and keep-alive
	// timeouts left zero take package sources/pulsar's bounded defaults,
	// each at most a quarter of the shorter of AdminTimeout and
	// SubscribeTimeout (ClientDefaultsWithin: sources/pulsar's defaults
	// with the default AdminTimeout and SubscribeTimeout), so that the client gives up on a broker it cannot
	// reach before the backend stops waiting for it and Close returns with
	// none of its calls running; and the client's logs go to Logger with
	// the URL's user information redacted. Timeouts set are kept: set
	// above those bounds, a lookup may go on retrying after Close
	// returns, for up to the operation timeout.
	ClientOptions pulsar.ClientOptions `validate:"-"`
	// Codec turns values into message payloads and back. Required. A panic
	// in Encode fails that publish with an error wrapping the
	// *message.PanicError, before it takes a send slot; a panic in Decode
	// makes the message one that does not decode (logged, acked and
	// skipped). A panic in Key or EventTime fails its publish as one in
	// Encode does.
	Codec topic.Codec[T] `validate:"required"`
	// Key, when set, gives each message its Pulsar key: a partitioned
	// topic routes it by key, and balanced groups subscribe Key_Shared, so
	// the messages of one key reach one member at a time, in order. Nil:
	// no key, balanced groups subscribe Shared.
	Key func(T) string `validate:"-"`
	// EventTime returns a value's event time, written as the message's
	// event time (a consumer reads it with Message.EventTime), so that a
	// pipeline publishing what it read keeps its time. Nil, or a zero
	// time, sets none.
	EventTime func(T) time.Time `validate:"-"`
	// Tenant is the Pulsar tenant of the topics. Default "public".
	Tenant string `validate:"omitempty,excludesall=/ "`
	// Namespace is the namespace of the topics within Tenant. Default
	// "default".
	Namespace string `validate:"omitempty,excludesall=/ "`
	// NonPersistent puts topics in the non-persistent domain (messages
	// are not stored: nothing is delivered again after a nack or a member
	// leaving). Default false: persistent.
	NonPersistent bool
	// TopicName maps a topic's name to its full Pulsar name. Nil: the
	// default, "<domain>://<tenant>/<namespace>/<name>" with each "/" of the
	// name written "~" ("edge/raw" becomes
	// "persistent://public/default/edge~raw"); Boulevard names never hold
	// "~", so two names never map to one topic.
	TopicName func(topic.Name) string `validate:"-"`
	// Partitions is the partition count topics are declared with: 0 (the
	// default) for a non-partitioned topic. Declaring a topic that exists
	// with another count (or partitioned when 0 is asked) is an error naming
	// both counts. At most MaxPartitions (4096).
	Partitions int `validate:"gte=0,lte=4096"`
	// Admin creates a partitioned topic that does not exist yet. Required
	// for Partitions > 0 unless every topic is created beforehand.
	Admin Admin `validate:"-"`
	// AdminTimeout bounds one topic declaration on the broker (within the
	// context NewTopic is given). A partition lookup or a producer's
	// creation still running once it has passed since the call began is
	// abandoned: the backend's Close no longer waits for it, and a
	// producer it creates later is closed. Default 30s; at most 1 hour.
	AdminTimeout time.Duration `validate:"gte=0,lte=1h"`
	// SubscribeTimeout bounds a Subscribe's wait for the client to
	// subscribe its consumer (the partition lookup and the subscribe of
	// every partition). pulsar-client-go can deadlock a subscribe to a
	// partitioned topic whose connection drops while one partition is
	// subscribed and another is not yet (see docs/topic-backends.md): past
	// this bound Subscribe fails with an *Error wrapping
	// sources/pulsar's ErrSubscribeTimeout and context.DeadlineExceeded,
	// one ERROR line names the topic, the subscription and the timeout,
	// the backend's Close no longer waits for the call, and a consumer it
	// returns later is closed. Set it above the time the client takes to
	// give up on its own: about ConnectionTimeout + 2 × OperationTimeout
	// (19 s with sources/pulsar's defaults; with pulsar-client-go's, 60 s
	// plus a dial it does not bound, which the system ends, after about 2
	// minutes on Linux, against a host that does not answer).
	// Default DefaultSubscribeTimeout (90s); at most 1 hour.
	SubscribeTimeout time.Duration `validate:"gte=0,lte=1h"`
	// MaxPendingMessages is the producer's pending queue per topic:
	// publishes sent and not yet confirmed by the broker. A publish with
	// on_full block waits for room in it; TryPublish and drop_newest report
	// DroppedOnFull when it is full. The client reserves it for every
	// partition, so MaxPendingMessages × max(Partitions, 1) must be at
	// most MaxPendingSlots. Default DefaultMaxPendingMessages (1000), or
	// MaxPendingSlots / Partitions when that is smaller (more than 1048
	// partitions).
	MaxPendingMessages int `validate:"gte=0,lte=1048576"`
	// SendTimeout bounds the wait for the broker's receipt; a publish that
	// gets none in time fails. Default 30s; negative disables it (a
	// publish then waits as long as its context allows, and TryPublish,
	// which has no context, at most DefaultSendTimeout). At most
	// MaxSendTimeout (1h).
	SendTimeout time.Duration `validate:"lte=1h"`
	// Batching lets the producer group concurrent publishes into batch
	// entries (each publish still waits for its own receipt). Default off:
	// with one publisher waiting for each receipt a batch only adds its
	// delay.
	Batching bool
	// BatchingMaxPublishDelay is the longest a batch waits to fill (with
	// Batching). Default pulsar-client-go's, 10ms; at most
	// MaxBatchingMaxPublishDelay (1h).
	BatchingMaxPublishDelay time.Duration `validate:"gte=0,lte=1h"`
	// NackRedeliveryDelay is how long a nacked message waits before it is
	// delivered again. Default 1s; 0 means the default, and a delay set
	// must be at least 1ms (pulsar-client-go cannot tick shorter). The
	// backend gives the client a nack precision within the delay (the
	// client's 256ms, or a finer one for a shorter delay), so that a
	// nacked message waits for more than the delay less that precision.
	// At most MaxNackRedeliveryDelay (1h).
	NackRedeliveryDelay time.Duration `validate:"omitempty,gte=1ms,lte=1h"`
	// MaxReconnectToBroker is how many attempts in a row a subscription's
	// consumer makes to reconnect after losing its connection before
	// pulsar-client-go gives up on it and closes it: its Receive then
	// fails with an *Error wrapping ErrConsumerClosed, and a topic source
	// subscribes anew. It is passed to every consumer's
	// pulsar.ConsumerOptions.MaxReconnectToBroker, as the field of that
	// name in the Pulsar source's ConsumerOptions is. 0, the default (the
	// client's), reconnects for ever; a value set must be at least 1 (the
	// client would take 0 for never reconnecting and keep the consumer
	// open: its subscription would neither receive nor fail). At most
	// MaxReconnectToBrokerLimit (65536).
	MaxReconnectToBroker int `validate:"gte=0,lte=65536"`
	// Logger receives the backend's events (a record that cannot be
	// decoded) and, for a client the backend makes, pulsar-client-go's
	// logs. Nil means slog.Default().
	Logger *slog.Logger `validate:"-"`
}

// WithDefaults returns o with every zero field that has a default set.
func (o Options[T]) WithDefaults() Options[T] {
	if o.Tenant == "" {
		o.Tenant = DefaultTenant
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.AdminTimeout == 0 {
		o.AdminTimeout = DefaultAdminTimeout
	}
	if o.SubscribeTimeout == 0 {
		o.SubscribeTimeout = DefaultSubscribeTimeout
	}
	if o.MaxPendingMessages == 0 {
		o.MaxPendingMessages = DefaultMaxPendingMessages
		if o.Partitions > 0 && o.Partitions <= MaxPartitions {
			// A Partitions out of bounds is reported alone.
			o.MaxPendingMessages = min(o.MaxPendingMessages, MaxPendingSlots/o.Partitions)
		}
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.NackRedeliveryDelay == 0 {
		o.NackRedeliveryDelay = DefaultNackRedeliveryDelay
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate checks the options and returns every broken rule at once, as a
// validate.Errors naming each field under "pulsartopic.", for example
// "pulsartopic.codec is required" or "pulsartopic.maxPendingMessages must
// be ≤ 256 with pulsartopic.partitions 4096 (maxPendingMessages ×
// partitions must be ≤ 1048576)".
func (o Options[T]) Validate() error {
	errs := []error{validate.Struct("pulsartopic", &o), o.checkPendingSlots()}
	if o.Client != nil && o.ClientOptions.URL != "" {
		errs = append(errs, validate.Field("pulsartopic.clientOptions.url", "excluded_with",
			"must be empty with pulsartopic.client"))
	}
	if o.Client == nil && o.ClientOptions.URL != "" {
		errs = append(errs, validate.Field("pulsartopic.clientOptions.url", "owned",
			"is set by the backend; use pulsartopic.serviceURL"))
	}
	return validate.Join(errs...)
}

// checkPendingSlots reports the rule between MaxPendingMessages and
// Partitions that struct tags cannot express: their product (Partitions
// counted as 1 when 0) must be at most MaxPendingSlots. It returns nil
// when either field is out of its own bounds, which the tags report.
func (o Options[T]) checkPendingSlots() error {
	if o.Partitions < 1 || o.Partitions > MaxPartitions || o.MaxPendingMessages < 1 || o.MaxPendingMessages > MaxPendingSlots {
		return nil
	}
	if o.MaxPendingMessages*o.Partitions <= MaxPendingSlots {
		return nil
	}
	return validate.Field("pulsartopic.maxPendingMessages", "pendingSlots", fmt.Sprintf(
		"must be ≤ %d with pulsartopic.partitions %d (maxPendingMessages × partitions must be ≤ %d)",
		MaxPendingSlots/o.Partitions, o.Partitions, MaxPendingSlots))
}

// String describes the options without anything that can hold a
// credential: the service URL with its user information redacted, and
// whether authentication is set, never what it holds. It shows the
// reconnection bound too, so that a log line of the options tells
// whether a subscription may give up.
func (o Options[T]) String() string {
	return fmt.Sprintf("pulsartopic.Options{serviceURL: %q, client: %t, authentication: %t, tenant: %q, namespace: %q, partitions: %d, maxReconnectToBroker: %d}",
		spulsar.RedactServiceURL(o.ServiceURL), o.Client != nil, o.ClientOptions.Authentication != nil, o.Tenant, o.Namespace, o.Partitions, o.MaxReconnectToBroker)
}

// GoString is String, so that %#v shows no credential either.
func (o Options[T]) GoString() string { return o.String() }

// Format writes String for every verb (%q quotes it).
func (o Options[T]) Format(f fmt.State, verb rune) {
	s := o.String()
	if verb == 'q' {
		s = fmt.Sprintf("%q", s)
	}
	_, _ = fmt.Fprint(f, s)
}

// LogValue logs what String shows.
func (o Options[T]) LogValue() slog.Value { return slog.StringValue(o.String()) }

// topicName is the default mapping of a topic name to a full Pulsar name.
func (o Options[T]) topicName(n topic.Name) string {
	if o.TopicName != nil {
		return o.TopicName(n)
	}
	domain := "persistent"
	if o.NonPersistent {
		domain = "non-persistent"
	}
	return domain + "://" + o.Tenant + "/" + o.Namespace + "/" + strings.ReplaceAll(string(n), "/", "~")
}
