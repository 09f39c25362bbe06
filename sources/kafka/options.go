package kafka

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkalimits"
	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
	"github.com/boulevard-go/boulevard/telemetry"
	"github.com/boulevard-go/boulevard/validate"
)

// MaxOpenRequests is the largest Options.Config.Net.MaxOpenRequests
// Validate accepts (sarama's default is 5; it checks only that the value
// is positive): sarama makes two channels of that many entries for every
// broker connection, and a value past what make accepts panics on
// sarama's own goroutine when the source connects.
const MaxOpenRequests = kafkalimits.OpenRequests

// Default values of the source options. A zero field in Options takes the
// matching default: InitialOffset OffsetLatest, BeginOffset BeginCommitted,
// CommitMode CommitInterval, CommitInterval 1s, FailurePolicy
// FailureCommit, RedeliveryBackoff 1s, RevokeTimeout 10s, ConnectTimeout
// 5s, HighWaterInterval 5s. The franz-go source has the same defaults.
const (
	DefaultInitialOffset     = claim.DefaultInitialOffset
	DefaultBeginOffset       = claim.DefaultBeginOffset
	DefaultCommitMode        = claim.DefaultCommitMode
	DefaultCommitInterval    = claim.DefaultCommitInterval
	DefaultFailurePolicy     = claim.DefaultFailurePolicy
	DefaultRedeliveryBackoff = claim.DefaultRedeliveryBackoff
	DefaultRevokeTimeout     = claim.DefaultRevokeTimeout
	// DefaultConnectTimeout bounds the connection check every Run starts
	// with (Options.ConnectTimeout).
	DefaultConnectTimeout = claim.DefaultConnectTimeout
	// DefaultHighWaterInterval is how often a member lists the end offsets
	// of its claimed partitions (Options.HighWaterInterval).
	DefaultHighWaterInterval = claim.DefaultHighWaterInterval
	// DefaultDialTimeout is Config.Net.DialTimeout when the Config leaves
	// it at sarama's default (30s).
	DefaultDialTimeout = 5 * time.Second
	// DefaultMetadataTimeout is Config.Metadata.Timeout when the Config
	// leaves it at sarama's default (0: no bound, so a metadata refresh
	// against unresponsive brokers could take ReadTimeout × brokers ×
	// (Metadata.Retry.Max+1)).
	DefaultMetadataTimeout = 10 * time.Second
	// DefaultWindow (512) is the permit window per partition when the
	// pipeline's producer.Options.Flow.Initial is 0 (Source.Info). A Kafka
	// fetch returns up to Config.Consumer.Fetch.Default bytes per
	// partition; with a smaller window sarama's fetch loop waits for the
	// pipeline more often.
	DefaultWindow = claim.DefaultWindow
)

// Initial offsets a group starts at on a partition it has no committed offset
// for.
const (
	// OffsetEarliest starts at the oldest record the broker still has.
	OffsetEarliest = claim.OffsetEarliest
	// OffsetLatest starts after the newest record: only records produced
	// after the group first joined are read (Kafka's own default).
	OffsetLatest = claim.OffsetLatest
	// OffsetTimestamp starts at the first record whose timestamp is at or
	// after Options.StartTime (found with a ListOffsets request by time),
	// or after the newest record when none is that recent. This is
	// BroadwayKafka's offset_reset_policy {:timestamp, t}.
	OffsetTimestamp = claim.OffsetTimestamp
)

// Where a claimed partition starts (Options.BeginOffset).
const (
	// BeginCommitted starts at the group's committed offset, and at
	// InitialOffset only when there is none.
	BeginCommitted = claim.BeginCommitted
	// BeginReset starts every claimed partition at InitialOffset, whatever
	// the group committed: each assignment replays (or skips) from there.
	// This is BroadwayKafka's begin_offset: :reset.
	BeginReset = claim.BeginReset
)

// When handled offsets are committed (Options.CommitMode).
const (
	// CommitInterval commits the handled offsets of every claimed
	// partition every Options.CommitInterval, in one request per member.
	CommitInterval = claim.CommitInterval
	// CommitOnAck commits as soon as a partition's handled prefix advances:
	// advances are coalesced, and each member has at most one commit
	// request in flight (so at most one per partition); the advances that
	// arrive meanwhile go out in the next request, as soon as it returns.
	// A crash then replays only what was handled while a commit was on its
	// way. This is BroadwayKafka's offset_commit_on_ack. A failed commit is
	// retried at the next advance or after Options.CommitInterval.
	CommitOnAck = claim.CommitOnAck
)

// FailurePolicy says what a failed message with acker.DispositionDefault does
// to its partition's committed offset: FailureCommit or FailureRedeliver.
type FailurePolicy = claim.FailurePolicy

const (
	// FailureCommit treats a failed message as done once the processor's
	// HandleFailed hook (or the batcher's) has run: the offset is committed
	// past it, so a poison message never stalls its partition. This is
	// BroadwayKafka's behaviour. It is the default.
	FailureCommit = claim.FailureCommit
	// FailureRedeliver stops the partition at the failed message: the
	// committed offset does not pass it, the partition's messages after it
	// are no longer dispatched, and after RedeliveryBackoff the partition is
	// fetched again from the failed message on.
	FailureRedeliver = claim.FailureRedeliver
)

// Rebalance strategies accepted by Options.Rebalance.
const (
	RebalanceRange             = claim.RebalanceRange
	RebalanceRoundRobin        = claim.RebalanceRoundRobin
	RebalanceSticky            = claim.RebalanceSticky
	RebalanceCooperativeSticky = claim.RebalanceCooperativeSticky
)

// Options configure a Source. Zero fields take the documented defaults;
// New validates everything before anything connects.
//
// The permit window per partition is the pipeline's producer.Options.Flow
// (each claimed partition is one feed; DefaultWindow when its Initial is
// 0), and the number of consumer-group
// members a pipeline runs is producer.Options.Concurrency: every producer
// stage is one member with its own connections.
type Options struct {
	// Brokers are the bootstrap brokers, as host:port. Required.
	Brokers []string `validate:"required,dive,hostname_port"`
	// GroupID is the consumer group. Required.
	GroupID string `validate:"required"`
	// Topics are the topics the group subscribes to. Required.
	Topics []string `validate:"required,dive,required"`
	// InitialOffset is where the group starts on a partition without a
	// committed offset (on every claimed partition with BeginReset):
	// OffsetEarliest, OffsetLatest or OffsetTimestamp (with StartTime).
	// Default OffsetLatest.
	InitialOffset string `validate:"oneof=earliest latest timestamp"`
	// StartTime is the time OffsetTimestamp starts at: a partition starts
	// at its first record whose timestamp is at or after StartTime.
	// Required with OffsetTimestamp, and only allowed with it.
	StartTime time.Time `validate:"-"`
	// BeginOffset says whether a claimed partition starts at the group's
	// committed offset (BeginCommitted) or, whatever was committed, at
	// InitialOffset (BeginReset). Default BeginCommitted.
	BeginOffset string `validate:"oneof=committed reset"`
	// CommitMode says when handled offsets are committed: CommitInterval
	// (every CommitInterval) or CommitOnAck (as soon as a partition's
	// handled prefix advances). Default CommitInterval.
	CommitMode string `validate:"oneof=interval ack"`
	// Rebalance, when set, chooses the partition assignment strategy:
	// "range", "roundrobin", "sticky" or "cooperative-sticky" (incremental
	// rebalancing: partitions that stay assigned keep flowing). Empty keeps
	// Config.Consumer.Group.Rebalance.GroupStrategies (sarama's default:
	// range).
	Rebalance string `validate:"omitempty,oneof=range roundrobin sticky cooperative-sticky"`
	// CommitInterval is how often handled offsets are committed with
	// CommitMode CommitInterval, and how soon a failed commit is retried
	// with CommitOnAck. Offsets are also committed when a partition is
	// released and when the source closes; never once per message. Default
	// 1s; at least 1ms, at most 1 hour.
	CommitInterval time.Duration `validate:"gte=1ms,lte=1h"`
	// FailurePolicy is what a failed message with DispositionDefault does.
	// Default FailureCommit. DispositionDiscard always commits past the
	// message and DispositionRetry always redelivers it, whatever the
	// policy.
	FailurePolicy FailurePolicy `validate:"oneof=commit redeliver"`
	// RedeliveryBackoff is how long a partition waits before it fetches a
	// message to redeliver again. Default 1s; at least 1ms, at most 1 hour.
	RedeliveryBackoff time.Duration `validate:"gte=1ms,lte=1h"`
	// RevokeTimeout bounds how long a revoked (or closing) partition waits
	// for its in-flight messages before it commits what was handled and lets
	// the partition go; that commit, and every other, is given up after
	// RevokeTimeout too (see docs/kafka.md, Offsets). It must be below
	// Config.Consumer.Group.Rebalance.Timeout. Default 10s.
	RevokeTimeout time.Duration `validate:"gt=0"`
	// ConnectTimeout bounds the connection check each Run starts with:
	// every bootstrap broker is dialled at once and asked for its API
	// versions (TLS and SASL included), each attempt bounded by
	// ConnectTimeout (or by Config.Net's own timeouts when they are
	// shorter). When no broker answers, Run fails with ErrConnect naming
	// every broker and its cause, and the pipeline logs it at WARN and
	// restarts the source. Default 5s, at most 5 minutes.
	ConnectTimeout time.Duration `validate:"gt=0,lte=5m"`
	// HighWaterInterval is how often a member lists the end offsets of
	// the partitions it claims (one ListOffsets request per broker, each
	// given up after 5s), for the high-water marks and lags of Stats: the
	// client stops fetching a partition whose records wait for the
	// handlers, and the high-water mark of its last fetch misses what was
	// produced since. Stats reports the higher of the fetched and the
	// listed one. Default 5s; at least 10ms, at most 1 hour.
	HighWaterInterval time.Duration `validate:"gte=10ms,lte=1h"`
	// Unordered relaxes per-partition ordering: messages are balanced over
	// all processors instead of one processor per partition. Offsets are
	// still committed only up to the contiguous handled prefix. Default
	// false (a partition is handled in offset order by one processor).
	Unordered bool
	// Config is the sarama configuration for everything sarama offers (TLS,
	// SASL, version, client id, fetch sizes, session and rebalance
	// timeouts, strategies). Nil means sarama.NewConfig(). The source copies
	// it and owns these fields, whatever they hold:
	// Consumer.Offsets.Initial (from InitialOffset; a Config with
	// sarama.OffsetOldest there is refused unless InitialOffset is
	// OffsetEarliest, so that a config carried over from a sarama consumer
	// does not start new partitions elsewhere than it did),
	// Consumer.Offsets.AutoCommit (disabled: the source commits itself, as
	// CommitMode says),
	// Consumer.Return.Errors (true: errors are logged),
	// ChannelBufferSize (sized to the permit window), and Net.Proxy (the
	// member dials through a dialer of its own, which wraps a
	// Net.Proxy.Dialer you set, so that a Close past its deadline can cut
	// its connections), and the retry backoffs of Metadata.Retry,
	// Consumer.Retry and Producer.Retry (yours, BackoffFunc else Backoff,
	// until Close cuts the connections, and zero after, so that sarama's
	// retries, which then fail at once, do not hold Close past its
	// deadline). A few timeouts take
	// the source's defaults when they still hold sarama.NewConfig's value
	// (see SaramaDefaults); any other value is the user's and is kept. It
	// is checked with sarama's own Validate, and Net.MaxOpenRequests, by
	// which sarama sizes two channels per broker connection, must be at
	// most MaxOpenRequests.
	//
	// The source sets Metadata.AllowAutoTopicCreation false, whatever
	// Config says (sarama's default is true): a source reads, and on a
	// cluster with auto.create.topics.enable (Kafka's default) the
	// member's metadata lookups would otherwise create a subscribed topic
	// deleted under the running source again, with the broker's default
	// partition count, and the group read that topic instead of Run
	// failing with ErrUnknownTopic. The franz-go client never asks for a
	// topic to be created.
	//
	// The options print with their credentials redacted (see String):
	// nothing of Config is printed but its version, client id and whether
	// TLS and SASL are on.
	Config *sarama.Config `validate:"-"`
	// Logger, when set, receives the source's logs (annotated with the
	// stage name). Nil means the producer stage's logger (the pipeline's
	// Logger, annotated with the stage name), or slog.Default() when that
	// is nil too.
	Logger *slog.Logger `name:"-" validate:"-"`
	// Telemetry, when set, has its PartitionAssigned and PartitionRevoked
	// hooks called as the member claims and lets go of each partition
	// (see docs/kafka.md); its other hooks are the pipeline's and are not
	// called by the source. Nil (the default) is off.
	Telemetry *telemetry.Hooks `name:"-" validate:"-"`
}

// WithDefaults returns o with every zero field replaced by its default, and
// a nil Config by sarama.NewConfig().
func (o Options) WithDefaults() Options {
	o.fields().SetDefaults()
	if o.Config == nil {
		o.Config = sarama.NewConfig()
	}
	return o
}

// fields points at the options the franz-go source has too.
func (o *Options) fields() claim.Fields {
	return claim.Fields{InitialOffset: &o.InitialOffset, BeginOffset: &o.BeginOffset, CommitMode: &o.CommitMode,
		CommitInterval: &o.CommitInterval, FailurePolicy: &o.FailurePolicy, RedeliveryBackoff: &o.RedeliveryBackoff,
		RevokeTimeout: &o.RevokeTimeout, ConnectTimeout: &o.ConnectTimeout,
		HighWaterInterval: &o.HighWaterInterval}
}

// saramaDefaults is sarama.NewConfig(), to tell the fields a user left at
// sarama's default from those they set.
var saramaDefaults = sync.OnceValue(sarama.NewConfig)

// SaramaDefaults sets the timeouts the source chooses in cfg, for each
// field that still holds sarama.NewConfig's value (or zero): a value that
// differs is the user's and is kept. The source applies it to its copy of
// Options.Config; it is exported so that the choice is visible and
// testable. A nil cfg has no field to set: it does nothing.
//
//   - Net.DialTimeout: DefaultDialTimeout (5s; sarama's is 30s).
//   - Metadata.Timeout: DefaultMetadataTimeout (10s; sarama's is 0, no
//     bound), so that a metadata refresh against unresponsive brokers gives
//     up instead of retrying each broker for Net.ReadTimeout.
//     It also bounds each attempt of the lookup of a claim's start offset
//     (BeginReset, OffsetTimestamp); an attempt that fails is tried again
//     1s later, then twice as long each time up to 10s, until one
//     succeeds or the claim ends, unless the cluster refused the listing
//     with an error Kafka says not to retry (Run then fails, see
//     ErrStartRefused).
//
// Net.ReadTimeout and Net.WriteTimeout keep sarama's 30s: a JoinGroup
// request waits for the whole rebalance (up to the other members'
// RevokeTimeout), and sarama bounds it by Net.ReadTimeout, so a shorter one
// would break rebalances. The first attempt to reach the cluster is bounded
// by Options.ConnectTimeout instead. Metadata.Retry keeps sarama's 3
// retries 250ms apart.
func SaramaDefaults(cfg *sarama.Config) {
	if cfg == nil {
		return
	}
	def := saramaDefaults()
	if cfg.Net.DialTimeout == def.Net.DialTimeout || cfg.Net.DialTimeout == 0 {
		cfg.Net.DialTimeout = DefaultDialTimeout
	}
	if cfg.Metadata.Timeout == def.Metadata.Timeout {
		cfg.Metadata.Timeout = DefaultMetadataTimeout
	}
}

// Validate reports every broken rule of o, which carries its defaults (see
// WithDefaults): the struct tags and the rules tags cannot express (the
// start time with the initial offset, the revoke timeout against sarama's
// rebalance timeout, sarama's own checks of the config). It returns nil or
// a validate.Errors naming each field under "kafka.", for example
// "kafka.brokers is required". New calls it.
func (o Options) Validate() error {
	errs := claim.Rules("kafka", &o, o.InitialOffset, o.StartTime)
	if o.Config != nil {
		errs = append(errs, claim.RevokeRule("kafka", o.RevokeTimeout, o.Config.Consumer.Group.Rebalance.Timeout,
			"config.Consumer.Group.Rebalance.Timeout"))
		if o.Config.Consumer.Offsets.Initial == sarama.OffsetOldest && o.InitialOffset != OffsetEarliest {
			// The source would replace it with InitialOffset: a config
			// carried over from a sarama consumer of the group would start
			// a partition without a committed offset elsewhere than it
			// did, past records it would have read.
			errs = append(errs, validate.Field("kafka.config.Consumer.Offsets.Initial", "initialOffset",
				fmt.Sprintf("is sarama.OffsetOldest, but InitialOffset is %q: the source starts a partition without a committed offset at InitialOffset; "+
					"set InitialOffset to %q, or leave this field at sarama's default", o.InitialOffset, OffsetEarliest)))
		}
		if err := o.saramaConfig(100).Validate(); err != nil {
			errs = append(errs, validate.Field("kafka.config", "sarama", fmt.Sprintf("is rejected by sarama: %v", err)))
		}
		// ChannelBufferSize is the source's own (saramaConfig), and the
		// source does not produce.
		errs = append(errs, kafkalimits.Check("kafka.config", o.Config, kafkalimits.Connections)...)
	}
	return validate.Join(errs...)
}

// saramaConfig copies the user's config and sets the fields the source
// owns. window is the permit window of one partition.
func (o *Options) saramaConfig(window int) *sarama.Config {
	cfg := *o.Config // shallow copy: only value fields are changed below
	SaramaDefaults(&cfg)
	switch o.InitialOffset {
	case OffsetEarliest:
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	default:
		// OffsetTimestamp: the claim starts at the newest record, then the
		// source moves it to the offset for StartTime before delivering.
		cfg.Consumer.Offsets.Initial = sarama.OffsetNewest
	}
	// The source sends its own OffsetCommit requests (commit.go), so that
	// it knows what the broker accepted and can commit on ack.
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	// A source never asks the cluster to create a topic: one deleted
	// under it stays deleted, and Run fails with ErrUnknownTopic.
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Consumer.Offsets.AutoCommit.Interval = o.CommitInterval
	cfg.Consumer.Return.Errors = true
	// sarama's per-partition channel holds what it fetched ahead of the
	// source; it never needs more than one refill's worth.
	cfg.ChannelBufferSize = max(1, window/2)
	switch o.Rebalance {
	case RebalanceRange:
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	case RebalanceRoundRobin:
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	case RebalanceSticky:
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	case RebalanceCooperativeSticky:
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	}
	return &cfg
}
