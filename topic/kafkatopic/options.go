package kafkatopic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkalimits"
	"github.com/boulevard-go/boulevard/internal/redact"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/validate"
)

// Upper bounds of [Options], checked by Validate (the struct tags repeat
// the numbers), so that a mistyped size is an error, not an allocation
// that exhausts memory or a panic on one of sarama's goroutines.
const (
	// MaxPartitions is the largest Options.Partitions.
	MaxPartitions = 100000
	// MaxReplicationFactor is the largest Options.ReplicationFactor.
	MaxReplicationFactor = 32
	// MaxPublishBuffer is the largest Options.PublishBuffer: a channel of
	// that many entries is made when the backend starts.
	MaxPublishBuffer = 1 << 20
	// MaxAdminTimeout is the largest Options.AdminTimeout and
	// Options.RevokeTimeout: a wait past it is a mistyped value, not a
	// bound.
	MaxAdminTimeout = time.Hour
	// MaxNackRedeliveryDelay is the largest Options.NackRedeliveryDelay.
	MaxNackRedeliveryDelay = time.Hour
	// MinHighWaterInterval and MaxHighWaterInterval bound
	// Options.HighWaterInterval, as the Kafka sources' option of that
	// name: each interval sends the cluster one ListOffsets request per
	// broker.
	MinHighWaterInterval = 10 * time.Millisecond
	MaxHighWaterInterval = time.Hour
	// MaxConnectTimeout is the largest Options.ConnectTimeout.
	MaxConnectTimeout = 5 * time.Minute
	// MaxChannelBufferSize is the largest Options.Config.ChannelBufferSize
	// (sarama's default 256; sarama checks only that it is not negative):
	// sarama makes a channel of that many entries for every topic and
	// partition it produces to and two for every partition it consumes.
	MaxChannelBufferSize = kafkalimits.ChannelBufferSize
	// MaxOpenRequests is the largest Options.Config.Net.MaxOpenRequests
	// (sarama's default 5): sarama makes two channels of that many entries
	// for every broker connection.
	MaxOpenRequests = kafkalimits.OpenRequests
	// MaxProducerRetries is the largest Options.Config.Producer.Retry.Max
	// (sarama's default 3): sarama makes a table of that many entries for
	// every partition it produces to.
	MaxProducerRetries = kafkalimits.ProducerRetries
)

// Defaults applied by [New] to zero fields of [Options].
const (
	// DefaultPartitions is Options.Partitions: one partition, as Kafka's own
	// num.partitions default, which keeps every publisher's order.
	DefaultPartitions = 1
	// DefaultReplicationFactor is Options.ReplicationFactor.
	DefaultReplicationFactor = 1
	// DefaultAcks is Options.Acks: every in-sync replica stores a record
	// before its publish returns.
	DefaultAcks = AcksAll
	// DefaultAdminTimeout is Options.AdminTimeout.
	DefaultAdminTimeout = 30 * time.Second
	// DefaultConnectTimeout is Options.ConnectTimeout.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultRevokeTimeout is Options.RevokeTimeout.
	DefaultRevokeTimeout = 5 * time.Second
	// DefaultHighWaterInterval is Options.HighWaterInterval.
	DefaultHighWaterInterval = 5 * time.Second
	// DefaultPublishBuffer is Options.PublishBuffer.
	DefaultPublishBuffer = 256
	// DefaultNackRedeliveryDelay is Options.NackRedeliveryDelay, as
	// pulsartopic's.
	DefaultNackRedeliveryDelay = time.Second
	// DefaultInitialOffset is Options.InitialOffset: a new group starts
	// at the log end as of its first Subscribe.
	DefaultInitialOffset = kafka.OffsetLatest
)

// Acks values: how many replicas store a record before the broker
// acknowledges it (Kafka's acks setting).
const (
	// AcksAll is acks=all: every in-sync replica (the default).
	AcksAll = "all"
	// AcksLeader is acks=1: the partition leader only.
	AcksLeader = "leader"
	// AcksNone is acks=0: the broker does not answer; a publish returns
	// once the record is written to the connection.
	AcksNone = "none"
)

// Options configures a [Backend]. Zero fields take the documented defaults.
type Options[T any] struct {
	// Brokers are the bootstrap brokers, "host:port". Required.
	Brokers []string `validate:"required,min=1,dive,hostname_port"`
	// Config is the sarama configuration the backend's clients start from:
	// protocol version, client id, TLS, SASL, fetch and producer tuning. It
	// is copied, never modified; the backend then sets what its guarantees
	// need (producer successes and errors returned, RequiredAcks from Acks,
	// consumer errors returned, group offsets committed by the backend,
	// Net.DialTimeout at most ConnectTimeout, Admin.Timeout from
	// AdminTimeout, and Net.Proxy: the clients dial through a dialer of the
	// backend's, which wraps a Net.Proxy.Dialer you set, so that Close can
	// cut their connections at its deadline, and the retry backoffs of
	// Metadata.Retry, Producer.Retry and Consumer.Retry, yours until a
	// client's connections are cut and zero after). The backend's second
	// producer, which sends records one per request (see
	// [RecordTooLargeError]), takes it with its Producer.Flush settings
	// replaced. Metadata.AllowAutoTopicCreation is false: only the
	// backend's topic creation (NewTopic) creates a topic, with Partitions
	// and ReplicationFactor, so a topic deleted under a running backend is
	// not created again by a publish or a subscriber's lookup with the
	// broker's defaults, even on a cluster with auto.create.topics.enable;
	// a Publish to it fails with an error naming the topic until it is
	// created again. Where a new balanced group starts is InitialOffset's, not
	// Consumer.Offsets.Initial's: the backend commits the group's starting
	// offsets before its first member joins, and sets
	// Consumer.Offsets.Initial to sarama.OffsetOldest for a partition
	// still without one (the commit refused because members elsewhere
	// joined first, or a partition added since) or whose committed offset
	// retention has since deleted, where starting later could miss
	// records. Nil means
	// sarama.NewConfig(). Its credentials never
	// appear in errors, logs or the String form of the options. The
	// fields by which sarama sizes what it allocates are bounded (sarama
	// checks only that they are not negative): ChannelBufferSize at most
	// MaxChannelBufferSize, Net.MaxOpenRequests at most MaxOpenRequests,
	// Producer.Retry.Max at most MaxProducerRetries. A subscriber's client
	// lowers ChannelBufferSize further, to its share of the topic's queue
	// capacity over the topic's partitions (at least 1), so that the
	// records sarama buffers for it are bounded by that capacity.
	Config *sarama.Config `name:"-"`
	// Codec turns values into record payloads and back. Required. A panic
	// in Encode fails that publish with an error wrapping the
	// *message.PanicError; a panic in Decode makes the record one that
	// does not decode (logged, skipped and committed past). A panic in
	// Key, EventTime or Headers fails its publish as one in Encode does.
	Codec Codec[T] `validate:"required"`
	// Key returns a value's record key. Records with the same key go to
	// the same partition (sarama's hash partitioner, unless Config names
	// another), so one key's records keep their order for every consumer.
	// Nil means no key: records spread over the partitions.
	Key func(T) []byte `name:"-"`
	// EventTime returns a value's event time, written as the record's
	// timestamp (Kafka's CreateTime), so that a pipeline that reads
	// timestamped records and publishes them on keeps their time. Nil, or
	// a zero time, leaves the timestamp to the producer (the time of the
	// publish).
	EventTime func(T) time.Time `name:"-"`
	// Headers returns a value's record headers. Nil means none.
	Headers func(T) []sarama.RecordHeader `name:"-"`
	// Partitions is the partition count of the topics the backend creates,
	// and the least an existing topic must have. Default 1, at most
	// MaxPartitions (100000).
	Partitions int32 `validate:"gte=0,lte=100000"`
	// ReplicationFactor is the replication factor of the topics the
	// backend creates. Default 1, at most MaxReplicationFactor (32).
	ReplicationFactor int16 `name:"replication_factor" validate:"gte=0,lte=32"`
	// Acks is "all" (default), "leader" or "none"; see AcksAll. The
	// producing clients send one request at a time on each connection
	// (Net.MaxOpenRequests 1, whatever Config says), and with "all",
	// protocol version 0.11 or later and Producer.Retry.Max at least 1 the
	// producer is idempotent: a batch retried after the broker stored it is
	// stored once. With "leader" or "none" a retried batch the broker had
	// stored is stored again.
	Acks string `validate:"omitempty,oneof=all leader none"`
	// AdminTimeout bounds each administrative step, even against brokers
	// that stopped answering: creating or checking a topic, a Subscribe
	// (resolving a new group's starting offsets, connecting the
	// subscriber's client, a member's first join of its group, a broadcast
	// subscriber's reading of the log ends), and a subscriber's closing (a
	// Close of the subscription or of the topic that has not finished by
	// then cuts the subscriber's connections, so that brokers that stopped
	// answering do not keep it waiting). Default 30s, at most
	// MaxAdminTimeout (1h).
	AdminTimeout time.Duration `name:"admin_timeout" validate:"gte=0,lte=1h"`
	// ConnectTimeout bounds New's first contact with the cluster (each
	// bootstrap broker dialled and asked for its API versions; see
	// NewContext) and each later attempt to connect to a broker (sarama's
	// Net.DialTimeout, unless Config sets a lower one). Default 10s, at
	// most MaxConnectTimeout (5m).
	ConnectTimeout time.Duration `name:"connect_timeout" validate:"gte=0,lte=5m"`
	// RevokeTimeout is how long a member whose partition the group moves to
	// another member waits for the messages of that partition it handed
	// out to be settled before it lets the partition go; what is still
	// unsettled then is delivered again by the next owner. While it waits
	// it calls the subscription's topic.SubscriberOptions.OnRelease, with
	// which a pipeline source (topic/source) has its batchers emit their
	// open batches at once. Keep it below
	// Config.Consumer.Group.Rebalance.Timeout (sarama's default 60s), or
	// the group drops the member while it waits. Default 5s, at most
	// MaxAdminTimeout (1h).
	RevokeTimeout time.Duration `name:"revoke_timeout" validate:"gte=0,lte=1h"`
	// HighWaterInterval is how often the backend asks the brokers for the
	// log ends of the partitions this process's balanced members claim
	// and its broadcast subscribers read (one ListOffsets request per
	// broker, on connections of the listing's own, each listing given up
	// after 5s and cut short once Close has closed the topics), for the
	// topics' Stats (Partitions): a subscriber takes its high-water mark
	// from its fetches, and stops fetching while its read-ahead is full
	// (a subscriber that does not receive). It is also how often each
	// broadcast subscriber and each balanced member asks for its topic's
	// ID, to tell the topic deleted and created again. Default 5s; at least
	// MinHighWaterInterval (10ms), at most MaxHighWaterInterval (1h).
	HighWaterInterval time.Duration `name:"high_water_interval" validate:"omitempty,gte=10ms,lte=1h"`
	// PublishBuffer is how many publishes may wait to be handed to the
	// producer; TryPublish reports DroppedOnFull when it is full, Publish
	// waits for room. Default 256, at most MaxPublishBuffer (1048576).
	PublishBuffer int `name:"publish_buffer" validate:"gte=0,lte=1048576"`
	// NackRedeliveryDelay is how long a message a balanced member nacked
	// waits before that member receives it again. The partition's
	// commits wait for it meanwhile, as for any unsettled message, and
	// the member's other messages go on being received, so a message
	// that fails on every delivery comes back once per delay instead of
	// as fast as the subscriber can nack it. Default 1s, at least 1ms
	// when set, at most MaxNackRedeliveryDelay (1h).
	NackRedeliveryDelay time.Duration `name:"nack_redelivery_delay" validate:"omitempty,gte=1ms,lte=1h"`
	// InitialOffset is where a balanced group starts on a partition
	// without a committed offset when its first Subscribe commits its
	// starting offsets: kafka.OffsetLatest (package sources/kafka;
	// "latest"), the log end as of that Subscribe, so the group is
	// delivered what is published from then on and nothing published
	// before, as the in-memory backend's group; or kafka.OffsetEarliest
	// ("earliest"), the oldest record the partition keeps, so a topic that
	// already holds records (an existing Kafka topic put under a topic
	// document) has them delivered. A committed offset is never moved,
	// whatever the setting: it only decides where a new group starts.
	// When the partitions it starts a group on hold records, Subscribe
	// logs one INFO line saying how many, skipped or to be delivered.
	// Broadcast subscribers have no group and are not affected: they
	// start at the log end as of their Subscribe. Default
	// DefaultInitialOffset (kafka.OffsetLatest).
	InitialOffset string `name:"initial_offset" validate:"omitempty,oneof=earliest latest"`
	// Logger receives one line per event (a failed join, a record that
	// does not decode, a lag). Nil means slog.Default().
	Logger *slog.Logger `name:"-"`
}

// WithDefaults returns o with every zero field set to its default. New
// calls it after Validate, whose rules hold for the zero values too.
func (o Options[T]) WithDefaults() Options[T] {
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = DefaultReplicationFactor
	}
	if o.Acks == "" {
		o.Acks = DefaultAcks
	}
	if o.AdminTimeout == 0 {
		o.AdminTimeout = DefaultAdminTimeout
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.RevokeTimeout == 0 {
		o.RevokeTimeout = DefaultRevokeTimeout
	}
	if o.HighWaterInterval == 0 {
		o.HighWaterInterval = DefaultHighWaterInterval
	}
	if o.PublishBuffer == 0 {
		o.PublishBuffer = DefaultPublishBuffer
	}
	if o.NackRedeliveryDelay == 0 {
		o.NackRedeliveryDelay = DefaultNackRedeliveryDelay
	}
	o.InitialOffset = cmp.Or(o.InitialOffset, DefaultInitialOffset)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate checks o and returns nil or a [validate.Errors] naming each
// broken rule by field ("brokers is required", "acks must be one of [all
// leader none]", "initial_offset must be one of [earliest latest]",
// "config is rejected by sarama: …" for a sarama configuration sarama
// refuses).
func (o Options[T]) Validate() error {
	errs := []error{validate.Struct("", &o)}
	if o.Config != nil {
		c := o.WithDefaults().saramaConfig()
		if err := c.Validate(); err != nil {
			errs = append(errs, validate.Field("config", "valid", "is rejected by sarama: "+redact.SaramaSecrets(c).Text(err.Error())))
		}
		errs = append(errs, kafkalimits.Check("config", c, kafkalimits.All)...)
	}
	return validate.Join(errs...)
}

// saramaConfig is the configuration of every client of the backend: a
// copy of o.Config with what the backend relies on set.
func (o Options[T]) saramaConfig() *sarama.Config {
	var c sarama.Config
	if o.Config != nil {
		c = *o.Config
	} else {
		c = *sarama.NewConfig()
	}
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	switch o.Acks {
	case AcksLeader:
		c.Producer.RequiredAcks = sarama.WaitForLocal
	case AcksNone:
		c.Producer.RequiredAcks = sarama.NoResponse
	default:
		c.Producer.RequiredAcks = sarama.WaitForAll
	}
	c.Consumer.Return.Errors = true
	c.Metadata.AllowAutoTopicCreation = false
	// Starting offsets are committed when a group is created; this applies
	// only when a group's offset fell below the log start (retention), and
	// then the member continues from the oldest record kept.
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	if o.ConnectTimeout > 0 {
		c.Net.DialTimeout = min(c.Net.DialTimeout, o.ConnectTimeout)
	}
	if o.AdminTimeout > 0 {
		c.Admin.Timeout = o.AdminTimeout
	}
	if !c.Version.IsAtLeast(sarama.V0_10_1_0) { // topic creation needs 0.10.1
		c.Version = sarama.DefaultVersion
	}
	return &c
}

// String describes the options with every credential left out: of Config
// only the protocol version, the client id and whether TLS and SASL are on
// (and the SASL mechanism). %v, %+v, %s, %q and %#v all print this.
func (o Options[T]) String() string {
	var b redact.Fields
	fmt.Fprintf(&b, "kafkatopic.Options{Brokers:%q Partitions:%d ReplicationFactor:%d", o.Brokers, o.Partitions, o.ReplicationFactor)
	b.Quoted("Acks", o.Acks)
	b.Duration("AdminTimeout", o.AdminTimeout)
	b.Duration("ConnectTimeout", o.ConnectTimeout)
	b.Duration("RevokeTimeout", o.RevokeTimeout)
	b.Duration("HighWaterInterval", o.HighWaterInterval)
	b.Int("PublishBuffer", int64(o.PublishBuffer))
	b.Duration("NackRedeliveryDelay", o.NackRedeliveryDelay)
	b.Quoted("InitialOffset", o.InitialOffset)
	b.Config(o.Config)
	b.WriteString("}")
	return b.String()
}

// GoString is String.
func (o Options[T]) GoString() string { return o.String() }

// Format prints String for every verb (quoted for %q).
func (o Options[T]) Format(f fmt.State, verb rune) {
	redact.Format(f, verb, o.String())
}

// LogValue logs the options' non-secret fields.
func (o Options[T]) LogValue() slog.Value { return slog.StringValue(o.String()) }

// MarshalJSON encodes String, so that no encoder reaches Config's
// credentials.
func (o Options[T]) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }
