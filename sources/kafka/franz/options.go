package franz

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/sources/kafka/internal/claim"
	"github.com/boulevard-go/boulevard/telemetry"
	"github.com/boulevard-go/boulevard/validate"
)

// Values of Options.InitialOffset, BeginOffset, CommitMode and Rebalance;
// they mean what they mean for the sarama source (package kafka), which
// documents each.
const (
	OffsetEarliest  = claim.OffsetEarliest
	OffsetLatest    = claim.OffsetLatest
	OffsetTimestamp = claim.OffsetTimestamp

	BeginCommitted = claim.BeginCommitted
	BeginReset     = claim.BeginReset

	CommitInterval = claim.CommitInterval
	CommitOnAck    = claim.CommitOnAck

	RebalanceRange             = claim.RebalanceRange
	RebalanceRoundRobin        = claim.RebalanceRoundRobin
	RebalanceSticky            = claim.RebalanceSticky
	RebalanceCooperativeSticky = claim.RebalanceCooperativeSticky
)

// FailurePolicy says what a failed message with acker.DispositionDefault does
// to its partition's committed offset: FailureCommit (commit past it, the
// default) or FailureRedeliver (fetch the partition again from it after
// RedeliveryBackoff). It is the sarama source's type.
type FailurePolicy = claim.FailurePolicy

// Failure policies.
const (
	FailureCommit    = claim.FailureCommit
	FailureRedeliver = claim.FailureRedeliver
)

// Default values of the source options. A zero field in Options takes the
// matching default; they are the sarama source's.
const (
	DefaultInitialOffset     = claim.DefaultInitialOffset
	DefaultBeginOffset       = claim.DefaultBeginOffset
	DefaultCommitMode        = claim.DefaultCommitMode
	DefaultCommitInterval    = claim.DefaultCommitInterval
	DefaultFailurePolicy     = claim.DefaultFailurePolicy
	DefaultRedeliveryBackoff = claim.DefaultRedeliveryBackoff
	DefaultRevokeTimeout     = claim.DefaultRevokeTimeout
	DefaultConnectTimeout    = claim.DefaultConnectTimeout
	DefaultHighWaterInterval = claim.DefaultHighWaterInterval
	// DefaultWindow (512) is the permit window per partition when the
	// pipeline's producer.Options.Flow.Initial is 0 (the sarama source's
	// too).
	DefaultWindow = claim.DefaultWindow
	// DefaultLookupTimeout (10s) is Options.LookupTimeout when it is 0:
	// the sarama source's DefaultMetadataTimeout, which bounds that
	// source's lookup of a claim's start offset.
	DefaultLookupTimeout = 10 * time.Second
	// DefaultFetchMaxWait (500ms, sarama's Consumer.MaxWaitTime) is the
	// kgo.FetchMaxWait the source gives its client before ClientOptions,
	// which may set another. franz-go's own default, 5s, would let a
	// partition the source paused (its processors stalled) and then
	// resumed wait for up to 5s for its next fetch while the broker holds
	// an earlier one for the member's other, caught-up partitions: the
	// partition sits idle with a backlog. A shorter wait costs an empty
	// fetch per broker and interval when nothing is published.
	DefaultFetchMaxWait = 500 * time.Millisecond
)

// Options configure a Source. They are the sarama source's options
// (kafka.Options), field for field, except Config: the franz-go client is
// configured with ClientOptions, and LookupTimeout stands for its
// Metadata.Timeout. Zero fields take the documented defaults;
// New validates everything before anything connects.
//
// The permit window per partition is the pipeline's producer.Options.Flow
// (each claimed partition is one feed; DefaultWindow when its Initial is
// 0), and the number of consumer-group members a pipeline runs is
// producer.Options.Concurrency: every producer stage is one member with its
// own client.
type Options struct {
	// Brokers are the bootstrap brokers, as host:port. Required. A broker
	// given with user information ("user:password@host:port") fails
	// validation, with an error that does not repeat it.
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
	// at its first record whose timestamp is at or after StartTime (after
	// the newest when none is). Required with OffsetTimestamp, and only
	// allowed with it.
	StartTime time.Time `validate:"-"`
	// BeginOffset says whether a claimed partition starts at the group's
	// committed offset (BeginCommitted) or, whatever was committed, at
	// InitialOffset (BeginReset). Default BeginCommitted.
	BeginOffset string `validate:"oneof=committed reset"`
	// CommitMode says when handled offsets are committed: CommitInterval
	// (every CommitInterval) or CommitOnAck (as soon as a partition's
	// handled prefix advances, one request in flight per member). Default
	// CommitInterval.
	CommitMode string `validate:"oneof=interval ack"`
	// Rebalance, when set, chooses the partition assignment strategy:
	// "range", "roundrobin", "sticky" or "cooperative-sticky". Empty keeps
	// the balancers of ClientOptions, or franz-go's default:
	// cooperative-sticky (incremental rebalancing: partitions that stay
	// assigned keep flowing).
	Rebalance string `validate:"omitempty,oneof=range roundrobin sticky cooperative-sticky"`
	// CommitInterval is how often handled offsets are committed with
	// CommitMode CommitInterval, and how soon a failed commit is retried
	// with CommitOnAck. Offsets are also committed when a partition is
	// released and when the source closes; never once per message.
	// Default 1s; at least 1ms, at most 1 hour.
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
	// for its in-flight messages before it commits what was handled and
	// lets the partition go; that commit, and every other, is given up
	// after RevokeTimeout too (see docs/kafka.md, Offsets). It must be
	// below the client's
	// kgo.RebalanceTimeout (franz-go's default 60s). Default 10s.
	RevokeTimeout time.Duration `validate:"gt=0"`
	// ConnectTimeout bounds the connection check each Run starts with:
	// every bootstrap broker is dialled at once (with ClientOptions' TLS
	// and SASL) and asked for its API versions. When no broker answers
	// within ConnectTimeout, Run fails with ErrConnect naming every broker
	// and its cause. Default 5s, at most 5 minutes.
	ConnectTimeout time.Duration `validate:"gt=0,lte=5m"`
	// HighWaterInterval is how often a member lists the end offsets of
	// the partitions it claims (one ListOffsets request per broker, each
	// given up after 5s), for the high-water marks and lags of Stats: the
	// client stops fetching a partition whose records wait for the
	// handlers, and the high-water mark of its last fetch misses what was
	// produced since. Stats reports the higher of the fetched and the
	// listed one. Both are the end a reader of the client's isolation
	// level reads up to: with kgo.FetchIsolationLevel(kgo.ReadCommitted())
	// in ClientOptions, the last stable offset, so the records of a
	// transaction still open do not count in the lag. Default 5s; at
	// least 10ms, at most 1 hour.
	HighWaterInterval time.Duration `validate:"gte=10ms,lte=1h"`
	// LookupTimeout bounds each attempt to find where a session's new
	// claims start with OffsetTimestamp (the ListOffsets requests by time
	// and at the end, on a client of the member's own, see docs/kafka.md,
	// Replay). When the cluster has not answered within it, or answered
	// with an error Kafka says to retry, the member logs a WARN line (at
	// the first attempt that fails, then at each doubling of the failed
	// attempts) and tries again, 1s later, then twice as long each time
	// up to 10s, until an attempt succeeds or the claims are let go;
	// franz-go's own lookup, on the group's connections, is never used.
	// An answer with an error Kafka says not to retry (an authorization
	// refusal, an invalid request: kerr.Error.Retriable false) is not
	// tried again: Run fails with ErrDenied or ErrStartRefused. The new
	// claims that have a committed offset (BeginCommitted) start there
	// without waiting for the lookup of the others, which stay paused
	// until it succeeds. It stands for the sarama source's
	// Config.Metadata.Timeout, which bounds that source's lookup. At most
	// 5m. Default 10s.
	LookupTimeout time.Duration `validate:"gt=0,lte=5m"`
	// Unordered relaxes per-partition ordering: messages are balanced over
	// all processors instead of one processor per partition. Offsets are
	// still committed only up to the contiguous handled prefix. Default
	// false (a partition is handled in offset order by one processor).
	Unordered bool
	// ClientOptions are franz-go options for everything the client offers
	// (TLS with kgo.DialTLSConfig, SASL, client id, fetch sizes, session
	// and rebalance timeouts, balancers). The source puts
	// kgo.FetchMaxWait(DefaultFetchMaxWait) before them, so a
	// kgo.FetchMaxWait here takes its place. It adds, after them, the
	// options it owns: kgo.SeedBrokers (Brokers), kgo.ConsumerGroup,
	// kgo.ConsumeTopics, kgo.DisableAutoCommit (the source commits itself,
	// as CommitMode says), kgo.KeepControlRecords (transactions' commit
	// and abort markers are committed past, never delivered, set here or
	// not), kgo.ConsumeResetOffset (from InitialOffset),
	// kgo.AdjustFetchOffsetsFn, the partition callbacks
	// (OnPartitionsAssigned, Revoked, Lost), when Rebalance is set,
	// kgo.Balancers, and kgo.WithPools with the source's pool of record
	// slices: the source recycles each record once its message is
	// delivered, so a hook given here that keeps a *kgo.Record past its
	// call finds it zeroed. A pool given here that implements
	// kgo.PoolDecompressBytes turns that recycling off (the messages'
	// values point into its buffers until their outcome). Each member also
	// builds, from them and Brokers, a client outside the group for its
	// commits, and one for each lookup of start offsets (OffsetTimestamp),
	// so that a request the cluster leaves unanswered does not hold the
	// group's heartbeats behind it (see docs/kafka.md, Commits). New
	// checks the options by building a client, and refuses
	// kgo.ConsumerGroup, kgo.ConsumeTopics and kgo.ConsumeRegex here
	// (franz.clientOptions, rule "owned"): the source would replace the
	// first two, and the third would make Topics regular expressions.
	//
	// The options print without them (see String): they may hold
	// credentials.
	ClientOptions []kgo.Opt `validate:"-"`
	// Logger, when set, receives the source's logs (annotated with the
	// stage name). Nil means the producer stage's logger, or
	// slog.Default() when that is nil too.
	Logger *slog.Logger `name:"-" validate:"-"`
	// Telemetry, when set, has its PartitionAssigned and PartitionRevoked
	// hooks called as the member claims and lets go of each partition;
	// its other hooks are the pipeline's. Nil (the default) is off.
	Telemetry *telemetry.Hooks `name:"-" validate:"-"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options) WithDefaults() Options {
	o.fields().SetDefaults()
	if o.LookupTimeout == 0 {
		o.LookupTimeout = DefaultLookupTimeout
	}
	return o
}

// fields points at the options the sarama source has too.
func (o *Options) fields() claim.Fields {
	return claim.Fields{InitialOffset: &o.InitialOffset, BeginOffset: &o.BeginOffset, CommitMode: &o.CommitMode,
		CommitInterval: &o.CommitInterval, FailurePolicy: &o.FailurePolicy, RedeliveryBackoff: &o.RedeliveryBackoff,
		RevokeTimeout: &o.RevokeTimeout, ConnectTimeout: &o.ConnectTimeout,
		HighWaterInterval: &o.HighWaterInterval}
}

// Validate reports every broken rule of o, which carries its defaults (see
// WithDefaults): the struct tags, the start time against the initial
// offset, the revoke timeout against the client's rebalance timeout, no
// nil entry in ClientOptions, and franz-go's own checks of ClientOptions.
// It returns nil or a validate.Errors naming each field under "franz.",
// for example "franz.brokers is required". New calls it.
func (o Options) Validate() error {
	errs := claim.Rules("franz", &o, o.InitialOffset, o.StartTime)
	for i, opt := range o.ClientOptions {
		if opt == nil {
			errs = append(errs, validate.Field(fmt.Sprintf("franz.clientOptions[%d]", i), "required", "must not be nil"))
		}
	}
	if slices.Contains(o.ClientOptions, nil) {
		return validate.Join(errs...) // franz-go cannot be asked: it calls every option
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), o.ClientOptions...), kgo.SeedBrokers(o.seeds()...))...)
	if err != nil {
		errs = append(errs, validate.Field("franz.clientOptions", "kgo", fmt.Sprintf("are rejected by franz-go: %v", claim.Flat(err))))
	} else {
		rt, _ := cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
		errs = append(errs, ownedOptions(cl)...)
		cl.Close()
		if rt > 0 {
			errs = append(errs, claim.RevokeRule("franz", o.RevokeTimeout, rt, "the client's RebalanceTimeout"))
		}
	}
	return validate.Join(errs...)
}

// ownedOptions reports the options of cl, a client built from
// ClientOptions alone, that the source owns and would silently replace (a
// group or topics of the options' own) or read otherwise than its options
// say (ConsumeRegex would make Topics regular expressions).
func ownedOptions(cl *kgo.Client) []error {
	var errs []error
	owned := func(opt, field string) {
		errs = append(errs, validate.Field("franz.clientOptions", "owned",
			fmt.Sprintf("must not set %s: the source sets it from %s", opt, field)))
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g != "" {
		owned("kgo.ConsumerGroup", "GroupID")
	}
	if ts, _ := cl.OptValue(kgo.ConsumeTopics).([]string); len(ts) > 0 {
		owned("kgo.ConsumeTopics", "Topics")
	}
	if re, _ := cl.OptValue(kgo.ConsumeRegex).(bool); re {
		owned("kgo.ConsumeRegex", "Topics, which are topic names")
	}
	return errs
}

// seeds are the brokers to build a client with while validating: Brokers
// when they are all host and numeric port, else a placeholder (the broken
// field is reported by the tags), so that franz-go's error, which quotes
// the broker, never shows what a broker given with user information
// ("user:password@host") holds.
func (o *Options) seeds() []string {
	for _, b := range o.Brokers {
		_, port, err := net.SplitHostPort(b)
		if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil {
			return []string{"127.0.0.1:9092"}
		}
	}
	if len(o.Brokers) == 0 {
		return []string{"127.0.0.1:9092"}
	}
	return o.Brokers
}

// resetOffset is the offset franz-go starts a partition at when the group
// has none for it (or, with BeginReset, always).
func (o *Options) resetOffset() kgo.Offset {
	switch o.InitialOffset {
	case OffsetEarliest:
		return kgo.NewOffset().AtStart()
	case OffsetTimestamp:
		return kgo.NewOffset().AfterMilli(o.StartTime.UnixMilli())
	}
	return kgo.NewOffset().AtEnd()
}

// balancer returns the balancer Rebalance names, nil when it is empty.
func (o *Options) balancer() kgo.GroupBalancer {
	switch o.Rebalance {
	case RebalanceRange:
		return kgo.RangeBalancer()
	case RebalanceRoundRobin:
		return kgo.RoundRobinBalancer()
	case RebalanceSticky:
		return kgo.StickyBalancer()
	case RebalanceCooperativeSticky:
		return kgo.CooperativeStickyBalancer()
	}
	return nil
}

// String describes the options without ClientOptions, which may hold
// credentials (only how many there are is shown). fmt's %v, %+v and %s
// print this.
func (o Options) String() string {
	var b strings.Builder
	b.WriteString("franz.Options{")
	fmt.Fprintf(&b, "Brokers:%q GroupID:%q Topics:%q", o.Brokers, o.GroupID, o.Topics)
	for _, f := range []struct{ name, v string }{
		{"InitialOffset", o.InitialOffset}, {"BeginOffset", o.BeginOffset}, {"CommitMode", o.CommitMode},
		{"Rebalance", o.Rebalance}, {"FailurePolicy", string(o.FailurePolicy)},
	} {
		if f.v != "" {
			fmt.Fprintf(&b, " %s:%q", f.name, f.v)
		}
	}
	if !o.StartTime.IsZero() {
		fmt.Fprintf(&b, " StartTime:%s", o.StartTime.Format(time.RFC3339Nano))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"CommitInterval", o.CommitInterval}, {"RedeliveryBackoff", o.RedeliveryBackoff},
		{"RevokeTimeout", o.RevokeTimeout}, {"ConnectTimeout", o.ConnectTimeout}, {"LookupTimeout", o.LookupTimeout},
		{"HighWaterInterval", o.HighWaterInterval},
	} {
		if f.v != 0 {
			fmt.Fprintf(&b, " %s:%s", f.name, f.v)
		}
	}
	if o.Unordered {
		b.WriteString(" Unordered:true")
	}
	if len(o.ClientOptions) > 0 {
		b.WriteString(" ClientOptions:" + strconv.Itoa(len(o.ClientOptions)) + "(redacted)")
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String: the options never print their client options.
func (o Options) GoString() string { return o.String() }

// LogValue logs the options as String does.
func (o Options) LogValue() slog.Value { return slog.StringValue(o.String()) }
