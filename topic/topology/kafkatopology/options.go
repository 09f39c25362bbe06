package kafkatopology

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
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/validate"
)

// Defaults applied to zero fields of [Options].
const (
	// DefaultPartitions is Options.Partitions.
	DefaultPartitions = 1
	// DefaultReplicationFactor is Options.ReplicationFactor.
	DefaultReplicationFactor = 1
	// DefaultAdminTimeout is Options.AdminTimeout.
	DefaultAdminTimeout = 30 * time.Second
	// DefaultConnectTimeout is Options.ConnectTimeout.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultReadAhead is Options.ReadAhead.
	DefaultReadAhead = 1024
	// DefaultRevokeTimeout is Options.RevokeTimeout.
	DefaultRevokeTimeout = 5 * time.Second
	// DefaultHighWaterInterval is Options.HighWaterInterval.
	DefaultHighWaterInterval = 5 * time.Second
	// DefaultHoldRetentionMargin is Options.HoldRetentionMargin: Kafka's
	// own default retention (log.retention.hours 168).
	DefaultHoldRetentionMargin = 7 * 24 * time.Hour
	// DefaultInitialOffset is Options.InitialOffset: a new group starts
	// at the log end as of its first declaration.
	DefaultInitialOffset = kafka.OffsetLatest
)

// Upper bounds of [Options], checked by Validate (the struct tags repeat
// the numbers), so that a mistyped size is an error, not an allocation
// that exhausts memory or a panic on one of sarama's goroutines.
const (
	// MaxPartitions is the largest Options.Partitions.
	MaxPartitions = 100000
	// MaxReplicationFactor is the largest Options.ReplicationFactor.
	MaxReplicationFactor = 32
	// MaxReadAhead is the largest Options.ReadAhead: the letters each
	// reader may keep fetched.
	MaxReadAhead = 1 << 20
	// MaxConnectTimeout is the largest Options.ConnectTimeout.
	MaxConnectTimeout = 5 * time.Minute
	// MaxAdminTimeout is the largest Options.AdminTimeout and
	// Options.RevokeTimeout: a wait past it is a mistyped value, not a
	// bound.
	MaxAdminTimeout = time.Hour
	// MinHighWaterInterval and MaxHighWaterInterval bound
	// Options.HighWaterInterval, as the Kafka sources' option of that
	// name: each interval sends the cluster one ListOffsets request per
	// broker.
	MinHighWaterInterval = 10 * time.Millisecond
	MaxHighWaterInterval = time.Hour
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

// MinHoldRetentionMargin is the least a hold topic must keep a letter past
// its due time: Declare refuses an existing hold topic whose retention.ms
// is below its delay plus MinHoldRetentionMargin (ErrRetentionTooShort),
// and Options.HoldRetentionMargin may not be set below it.
const MinHoldRetentionMargin = time.Hour

// Options configure a [Backend]. Zero fields take the documented defaults.
type Options[T any] struct {
	// Brokers are the bootstrap brokers, "host:port". Required.
	Brokers []string `validate:"required,min=1,dive,hostname_port"`
	// Config is the sarama configuration the backend's clients start from
	// (version, client id, TLS, SASL, timeouts). It is copied, never
	// modified; the backend then sets what its guarantees need: producer
	// successes returned, acks=all, its own partitioner, consumer errors
	// returned, offsets committed automatically from what is settled,
	// Consumer.Offsets.Initial sarama.OffsetOldest,
	// Metadata.AllowAutoTopicCreation false (only Declare creates the
	// topology's topics, with their partitions and retention: a topic
	// deleted under the backend is not created again by a produce or a
	// reader's lookup, even on a cluster with auto.create.topics.enable),
	// Net.DialTimeout at most ConnectTimeout, Admin.Timeout from
	// AdminTimeout, the retry backoffs of Metadata.Retry, Producer.Retry
	// and Consumer.Retry (yours until a client's connections are cut, and
	// zero after), and at least protocol version 0.11 (record headers).
	// Where a new group starts is InitialOffset's, not
	// Consumer.Offsets.Initial's: Declare commits
	// the group's starting offsets before any member joins, so sarama's
	// fallback to the oldest record applies only to a partition still
	// without a committed offset (the commit refused because members
	// elsewhere joined first, or a partition added since), where starting
	// later could miss letters. Nil means
	// sarama.NewConfig(). The fields by which sarama sizes what it
	// allocates are bounded (sarama checks only that they are not
	// negative): ChannelBufferSize at most MaxChannelBufferSize,
	// Net.MaxOpenRequests at most MaxOpenRequests, Producer.Retry.Max at
	// most MaxProducerRetries. The producing clients send one request at
	// a time on each connection (Net.MaxOpenRequests 1, whatever Config
	// says) and, with Producer.Retry.Max at least 1, are idempotent: a
	// batch retried after the broker stored it is stored once, so a
	// partition keeps each key's letters once, in order.
	Config *sarama.Config `name:"-"`
	// Codec turns values into record payloads and back. Required.
	Codec topic.Codec[T] `validate:"required"`
	// Partitions is the partition count of the topics the backend creates,
	// except the main topic of a sequenced topology, which gets one
	// partition per routing shard. Default 1, at most MaxPartitions
	// (100000).
	Partitions int32 `validate:"gte=0,lte=100000"`
	// ReplicationFactor is the replication factor of the topics the
	// backend creates. Default 1, at most MaxReplicationFactor (32).
	ReplicationFactor int16 `validate:"gte=0,lte=32"`
	// AdminTimeout bounds each administrative step: a Declare (creating
	// the topics, committing a group's starting offsets, starting the
	// releasers), a Subscribe or SubscribeDead connecting its reader, a
	// TryReceive catching up with the log, a reader asking where a
	// partition it claimed starts, and a produce (Publish, Hold, Requeue,
	// DeadLetter, a release) asking for its topic's partitions when the
	// backend's metadata lacks them. A Declare or Subscribe that has not
	// finished by then (or by its context's deadline, if sooner) cuts its
	// connections and fails; a TryReceive returns ErrCatchUp and a
	// produce ErrMetadata (by then, or by its context's deadline, if
	// sooner); see the package documentation, Bounded calls. It also
	// bounds a group reader's last commit and leave once the context of
	// its Close has ended (see the package documentation, Closing is
	// bounded). Default 30s, at most MaxAdminTimeout (1h).
	AdminTimeout time.Duration `validate:"gte=0,lte=1h"`
	// ConnectTimeout bounds connecting to the cluster: New's first contact
	// (each bootstrap broker dialled and asked for its API versions, every
	// step within ConnectTimeout; see NewContext) and each later attempt
	// to connect to a broker (sarama's Net.DialTimeout, unless Config sets
	// a lower one). Default 10s, at most MaxConnectTimeout (5m).
	ConnectTimeout time.Duration `validate:"gte=0,lte=5m"`
	// ReadAhead is how many fetched letters each reader keeps ready for
	// Receive. Below them, sarama buffers records in a channel per
	// partition: each reader's client sizes those channels to a share of
	// ReadAhead over the topic's partitions (at least 1 each; a smaller
	// Config.ChannelBufferSize is kept), so that they hold at most
	// ReadAhead records together, or one a partition when there are more
	// partitions. Default 1024, at most MaxReadAhead (1048576).
	ReadAhead int `validate:"gte=0,lte=1048576"`
	// RevokeTimeout is how long a reader whose partition the group moves
	// to another member waits for the letters of that partition it handed
	// out to be settled before it lets the partition go; what is still
	// unsettled then is delivered again by the next owner. While it waits
	// it calls what the reader's OnRelease set (topology.ReleaseNotifier),
	// with which a topology Source has its pipeline's batchers emit their
	// open batches at once. Keep it below the group's rebalance timeout.
	// Default 5s, at most MaxAdminTimeout (1h).
	RevokeTimeout time.Duration `validate:"gte=0,lte=1h"`
	// HighWaterInterval is how often the backend asks the brokers for the
	// log ends of the partitions its readers and releasers read (one
	// ListOffsets request per broker, on connections of the listing's
	// own, each listing given up after 5s and cut short as Close
	// begins), for Stats: a reader takes its high-water mark from its
	// fetches, and stops fetching while its buffer is full (a handler
	// that blocks) or, for a releaser, while the partition's next letter
	// is not due. It is also how often each reader (of Subscribe or
	// SubscribeDead) asks for the ID of the topic it reads, to tell the
	// topic deleted and created again.
	// Default 5s; at least MinHighWaterInterval (10ms), at most
	// MaxHighWaterInterval (1h).
	HighWaterInterval time.Duration `validate:"omitempty,gte=10ms,lte=1h"`
	// HoldRetentionMargin is how long a hold topic the backend creates
	// keeps a letter past its due time: the topic is created with
	// retention.ms set to its delay plus HoldRetentionMargin (and
	// cleanup.policy delete), so a held letter outlives its due time by
	// the margin even while no releaser runs (every process of the
	// topology down). An existing hold topic is used as it is, once
	// Declare has checked that it keeps letters at least their delay plus
	// MinHoldRetentionMargin. From MinHoldRetentionMargin (1h) to 87600h
	// (10 years). Default DefaultHoldRetentionMargin (7 days, Kafka's
	// default retention).
	HoldRetentionMargin time.Duration `validate:"gte=1h,lte=87600h"`
	// DLQRetention is the retention.ms of a DLQ the backend creates (with
	// cleanup.policy delete): how long a dead letter is kept, replayed or
	// not (Replay reads the DLQ; it deletes nothing). Zero, the default,
	// keeps dead letters until an operator deletes them (retention.ms -1);
	// otherwise from 1h to 87600h (10 years). An existing DLQ is used as it
	// is; Declare logs a WARN when it keeps dead letters for less.
	DLQRetention time.Duration `validate:"omitempty,gte=1h,lte=87600h" name:"dlqRetention"`
	// AcceptRetentionBytes lets Declare use an existing hold topic or DLQ
	// with a finite retention.bytes (its own, or the broker's
	// log.retention.bytes) as it is. By default Declare refuses one with a
	// RetentionError wrapping ErrRetentionTooShort: size retention deletes
	// the oldest records of a partition that holds more than
	// retention.bytes, however young they are, so a burst of retries or
	// dead letters can delete letters before they are released or
	// replayed. Set it when the operator has sized those topics for the
	// most they may hold. The topics the backend creates have no size
	// limit (retention.bytes -1) either way.
	AcceptRetentionBytes bool
	// InitialOffset is where the topology's consumer group starts on a
	// partition of the main topic without a committed offset when Declare
	// commits its starting offsets: kafka.OffsetLatest (package
	// sources/kafka; "latest"), the log end as of the first Declare, so
	// the group is delivered what is published from then on and nothing
	// published before, as the in-memory backend's group; or
	// kafka.OffsetEarliest ("earliest"), the oldest record the partition
	// keeps, so a topic that already holds records (one put under a
	// topology) has them delivered. A committed offset is never moved,
	// whatever the setting: it only decides where a new group starts.
	// When the partitions it starts a group on hold records, Declare logs
	// one INFO line saying how many, skipped or to be delivered.
	// Broadcast topologies have no group and are not affected: their
	// readers start at the log end as of Subscribe. Default
	// DefaultInitialOffset (kafka.OffsetLatest).
	InitialOffset string `validate:"oneof=earliest latest"`
	// Logger receives one line per event (a record that does not decode, a
	// failed release, a consumer group error). Nil means slog.Default().
	Logger *slog.Logger `name:"-"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options[T]) WithDefaults() Options[T] {
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.ReplicationFactor == 0 {
		o.ReplicationFactor = DefaultReplicationFactor
	}
	if o.AdminTimeout == 0 {
		o.AdminTimeout = DefaultAdminTimeout
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = DefaultReadAhead
	}
	if o.RevokeTimeout == 0 {
		o.RevokeTimeout = DefaultRevokeTimeout
	}
	if o.HighWaterInterval == 0 {
		o.HighWaterInterval = DefaultHighWaterInterval
	}
	if o.HoldRetentionMargin == 0 {
		o.HoldRetentionMargin = DefaultHoldRetentionMargin
	}
	o.InitialOffset = cmp.Or(o.InitialOffset, DefaultInitialOffset)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// Validate checks o (after WithDefaults) and returns nil or a
// validate.Errors naming every broken rule ("kafkatopology.brokers is
// required").
func (o Options[T]) Validate() error {
	errs := []error{validate.Struct("kafkatopology", &o)}
	if o.Config != nil {
		c := o.saramaConfig()
		if err := c.Validate(); err != nil {
			errs = append(errs, validate.Field("kafkatopology.config", "valid", "is rejected by sarama: "+redact.SaramaSecrets(c).Text(err.Error())))
		}
		errs = append(errs, kafkalimits.Check("kafkatopology.config", c, kafkalimits.All)...)
	}
	return validate.Join(errs...)
}

// saramaConfig is the configuration of every client of the backend.
func (o Options[T]) saramaConfig() *sarama.Config {
	var c sarama.Config
	if o.Config != nil {
		c = *o.Config
	} else {
		c = *sarama.NewConfig()
	}
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Metadata.AllowAutoTopicCreation = false
	if o.AdminTimeout > 0 {
		c.Admin.Timeout = o.AdminTimeout
	}
	if o.ConnectTimeout > 0 {
		c.Net.DialTimeout = min(c.Net.DialTimeout, o.ConnectTimeout)
	}
	if !c.Version.IsAtLeast(sarama.V0_11_0_0) {
		c.Version = sarama.DefaultVersion
	}
	return &c
}

// String describes the options with every credential left out: of Config
// only the protocol version, the client id and whether TLS and SASL are on
// (and the SASL mechanism). Every fmt verb prints this.
func (o Options[T]) String() string {
	var b redact.Fields
	fmt.Fprintf(&b, "kafkatopology.Options{Brokers:%q Partitions:%d ReplicationFactor:%d", o.Brokers, o.Partitions, o.ReplicationFactor)
	b.Duration("AdminTimeout", o.AdminTimeout)
	b.Duration("ConnectTimeout", o.ConnectTimeout)
	b.Int("ReadAhead", int64(o.ReadAhead))
	b.Duration("RevokeTimeout", o.RevokeTimeout)
	b.Duration("HighWaterInterval", o.HighWaterInterval)
	b.Duration("HoldRetentionMargin", o.HoldRetentionMargin)
	b.Duration("DLQRetention", o.DLQRetention)
	if o.AcceptRetentionBytes {
		b.WriteString(" AcceptRetentionBytes:true")
	}
	b.Quoted("InitialOffset", o.InitialOffset)
	b.Config(o.Config)
	b.WriteString("}")
	return b.String()
}

// GoString is String.
func (o Options[T]) GoString() string { return o.String() }

// Format prints String for every verb (quoted for %q), so that no verb
// reaches Config's fields.
func (o Options[T]) Format(f fmt.State, verb rune) { redact.Format(f, verb, o.String()) }

// LogValue logs the options' non-secret fields.
func (o Options[T]) LogValue() slog.Value { return slog.StringValue(o.String()) }

// MarshalJSON encodes String, so that no encoder reaches Config's
// credentials.
func (o Options[T]) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }
