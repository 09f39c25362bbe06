package topic

import (
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/boulevard-go/boulevard/topic/internal/quote"
	"github.com/boulevard-go/boulevard/validate"
)

// MaxNameLen is the longest topic, group or alias name, in bytes (249, as
// for Kafka topic names).
const MaxNameLen = 249

// Name is a topic name: 1 to [MaxNameLen] bytes of ASCII letters, digits,
// '.', '_' and '-', in one or more segments joined by '/' (the form
// "<group>/<name>" that package topic/config gives a group's topics); no
// whitespace, no control character, no empty segment. Use [NewName] to
// build one from a string; every call that takes a Name checks it.
type Name string

// NewName returns s as a topic Name, [ErrEmptyName] if s is empty, or a
// [*NameError] (wrapping [ErrInvalidName]) if s breaks the rules of [Name].
func NewName(s string) (Name, error) {
	if err := Name(s).Validate(); err != nil {
		return "", err
	}
	return Name(s), nil
}

// Validate returns nil for a valid topic name, [ErrEmptyName] for the empty
// name, or a [*NameError] saying which rule of [Name] it breaks.
func (n Name) Validate() error { return checkName("topic", string(n), true) }

// String returns the name.
func (n Name) String() string { return string(n) }

// GroupName is the name of a balanced consumer group: 1 to [MaxNameLen]
// bytes of ASCII letters, digits, '.', '_' and '-'. Use [NewGroupName] to
// build one from a string; [Handle.Subscribe] checks it.
type GroupName string

// NewGroupName returns s as a GroupName, [ErrEmptyName] if s is empty, or
// a [*NameError] (wrapping [ErrInvalidName]) if s breaks the rules of
// [GroupName].
func NewGroupName(s string) (GroupName, error) {
	if err := GroupName(s).Validate(); err != nil {
		return "", err
	}
	return GroupName(s), nil
}

// Validate returns nil for a valid group name, [ErrEmptyName] for the empty
// name, or a [*NameError] saying which rule of [GroupName] it breaks.
func (g GroupName) Validate() error { return checkName("group", string(g), false) }

// String returns the name.
func (g GroupName) String() string { return string(g) }

// NameRule is the character set of names, as error messages state it.
const NameRule = "1 to 249 ASCII letters, digits, '.', '_' or '-'"

// checkName applies the name rules; slashes allows '/' between segments
// (topic names).
func checkName(kind, s string, slashes bool) error {
	if s == "" {
		return ErrEmptyName
	}
	if len(s) > MaxNameLen {
		return &NameError{Kind: kind, Name: s, Reason: fmt.Sprintf("is %d bytes long, more than %d", len(s), MaxNameLen)}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		case c == '/' && slashes:
			if i == 0 || i == len(s)-1 || s[i-1] == '/' {
				return &NameError{Kind: kind, Name: s, Reason: "has an empty segment around '/'"}
			}
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			return &NameError{Kind: kind, Name: s, Reason: fmt.Sprintf("has %s at byte %d; a name is %s", quote.Value(s[i:i+size]), i, nameRule(slashes))}
		}
	}
	return nil
}

func nameRule(slashes bool) string {
	if slashes {
		return NameRule + ", in segments joined by '/'"
	}
	return NameRule
}

// SafeName returns s as is when it is empty or a valid topic name, and
// quoted and escaped otherwise: the form in which error messages show a
// name.
func SafeName(s string) string {
	if s == "" || checkName("", s, true) == nil {
		return s
	}
	return quote.Value(s)
}

// Mode selects how a topic delivers: to balanced consumer groups only, to
// broadcast subscribers only, or to both.
type Mode int

const (
	// BalancedOnly topics have exactly one consumer group (fixed by the
	// first balanced subscription); within it, each message goes to exactly
	// one subscriber. Broadcast subscriptions are refused.
	BalancedOnly Mode = iota
	// BroadcastOnly topics deliver every message to every subscriber
	// through a bounded ring. Balanced subscriptions are refused.
	BroadcastOnly
	// Mixed topics have any number of balanced groups plus broadcast
	// subscribers; a publish reaches all of them or none.
	Mixed
)

// OnFull is the balanced full-queue policy.
type OnFull int

const (
	// Block (the default) makes Publish wait for room.
	Block OnFull = iota
	// DropNewest makes Publish drop the message being published and report
	// [DroppedOnFull] when a group queue is full.
	DropNewest
)

// OnLag is the broadcast slow-subscriber policy.
type OnLag int

const (
	// DropOldest (the default): a subscriber that fell more than the ring's
	// capacity behind gets a lag notice (Item.Lagged = number missed) and
	// continues from the oldest retained message.
	DropOldest OnLag = iota
	// Disconnect gives a subscriber that fell behind one final lag notice,
	// then ErrSubscriptionClosed.
	Disconnect
)

// AckMode is how the acks of broadcast subscribers combine into the outcome
// of a tracked publish.
type AckMode int

const (
	// AckFirst (the default): the first ack or nack of any recipient
	// resolves the tracked publish.
	AckFirst AckMode = iota
	// AckAll acks the publish only after every subscriber eligible at
	// publish time acked it; any nack, or an eligible subscriber going away
	// first, nacks it; an empty eligible set nacks it at once. Requires a
	// broadcast-only topic, on_lag disconnect and ack propagation auto.
	AckAll
)

// PropagationMode says whether a topic hop bridges Ack/Nack between
// pipelines.
type PropagationMode int

const (
	// PropagationDisabled (the default): publishers into the topic are not
	// tracked; the upstream message is settled when it is handed over.
	PropagationDisabled PropagationMode = iota
	// PropagationAuto makes pipelines publish through a [TrackedPublisher] and
	// settle the upstream message with the downstream outcome.
	PropagationAuto
)

var (
	modeNames        = []string{"balanced_only", "broadcast_only", "mixed"}
	onFullNames      = []string{"block", "drop_newest"}
	onLagNames       = []string{"drop_oldest", "disconnect"}
	ackModeNames     = []string{"first", "all"}
	propagationNames = []string{"disabled", "auto"}
)

func enumString(names []string, v int, kind string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

func enumParse(names []string, s, kind string) (int, error) {
	for i, n := range names {
		if n == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("topic: unknown %s %s, want one of %v", kind, quote.Value(s), names)
}

// String returns "balanced_only", "broadcast_only" or "mixed".
func (m Mode) String() string { return enumString(modeNames, int(m), "Mode") }

// ParseMode parses the String form.
func ParseMode(s string) (Mode, error) {
	v, err := enumParse(modeNames, s, "mode")
	return Mode(v), err
}

// MarshalText returns the String form.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses the String form.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err == nil {
		*m = v
	}
	return err
}

// String returns "block" or "drop_newest".
func (o OnFull) String() string { return enumString(onFullNames, int(o), "OnFull") }

// ParseOnFull parses the String form.
func ParseOnFull(s string) (OnFull, error) {
	v, err := enumParse(onFullNames, s, "on_full")
	return OnFull(v), err
}

// MarshalText returns the String form.
func (o OnFull) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses the String form.
func (o *OnFull) UnmarshalText(b []byte) error {
	v, err := ParseOnFull(string(b))
	if err == nil {
		*o = v
	}
	return err
}

// String returns "drop_oldest" or "disconnect".
func (o OnLag) String() string { return enumString(onLagNames, int(o), "OnLag") }

// ParseOnLag parses the String form.
func ParseOnLag(s string) (OnLag, error) {
	v, err := enumParse(onLagNames, s, "on_lag")
	return OnLag(v), err
}

// MarshalText returns the String form.
func (o OnLag) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses the String form.
func (o *OnLag) UnmarshalText(b []byte) error {
	v, err := ParseOnLag(string(b))
	if err == nil {
		*o = v
	}
	return err
}

// String returns "first" or "all".
func (a AckMode) String() string { return enumString(ackModeNames, int(a), "AckMode") }

// ParseAckMode parses the String form.
func ParseAckMode(s string) (AckMode, error) {
	v, err := enumParse(ackModeNames, s, "ack_mode")
	return AckMode(v), err
}

// MarshalText returns the String form.
func (a AckMode) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses the String form.
func (a *AckMode) UnmarshalText(b []byte) error {
	v, err := ParseAckMode(string(b))
	if err == nil {
		*a = v
	}
	return err
}

// String returns "disabled" or "auto".
func (p PropagationMode) String() string {
	return enumString(propagationNames, int(p), "PropagationMode")
}

// ParsePropagationMode parses the String form.
func ParsePropagationMode(s string) (PropagationMode, error) {
	v, err := enumParse(propagationNames, s, "ack_propagation.mode")
	return PropagationMode(v), err
}

// MarshalText returns the String form.
func (p PropagationMode) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses the String form.
func (p *PropagationMode) UnmarshalText(b []byte) error {
	v, err := ParsePropagationMode(string(b))
	if err == nil {
		*p = v
	}
	return err
}

// Defaults applied by [Options.WithDefaults].
const (
	// DefaultBalancedCapacity is balanced.queue_capacity.
	DefaultBalancedCapacity = 1024
	// DefaultBroadcastCapacity is broadcast.queue_capacity.
	DefaultBroadcastCapacity = 4096
	// DefaultMaxInFlight is ack_propagation.max_in_flight.
	DefaultMaxInFlight = 1024
	// DefaultTimeout is ack_propagation.timeout.
	DefaultTimeout = 30 * time.Second
)

// Upper bounds checked by [Options.Validate] (and by [Handle.Tracked] for
// [TrackedOptions]), so that a mistyped size is an error, not an
// allocation that exhausts memory. The struct tags repeat the values.
const (
	// MaxCapacity is the largest balanced.queue_capacity and
	// broadcast.queue_capacity: 1048576 (1 << 20) messages. A queue
	// allocates its whole capacity up front: the ring when the topic is
	// created, a group's queue when its first member subscribes.
	MaxCapacity = 1 << 20
	// MaxInFlightLimit is the largest ack_propagation.max_in_flight (and
	// TrackedOptions.MaxInFlight): 1048576 (1 << 20) unresolved publishes
	// per tracked publisher.
	MaxInFlightLimit = 1 << 20
	// MaxTimeout is the largest ack_propagation.timeout (and
	// TrackedOptions.Timeout): 24h.
	MaxTimeout = 24 * time.Hour
)

// DefaultFailureLogInterval is the default TrackedOptions.FailureLogInterval.
const DefaultFailureLogInterval = 10 * time.Second

// MaxFailureLogInterval bounds TrackedOptions.FailureLogInterval.
const MaxFailureLogInterval = time.Hour

// BalancedPolicy governs the bounded queue of each balanced consumer group.
type BalancedPolicy struct {
	// Capacity is how many messages each group queue holds: 1 to
	// MaxCapacity. Default 1024.
	Capacity int `name:"queue_capacity" validate:"gte=1,lte=1048576"`
	// OnFull is what Publish does when a group queue is full. Default Block.
	// A publisher can override it with [Handle.PublishWith].
	OnFull OnFull `name:"on_full"`
}

// BroadcastPolicy governs the broadcast ring.
type BroadcastPolicy struct {
	// Capacity is how many slots the ring has, so how many messages a
	// subscriber may fall behind: the ring keeps a message only until
	// every subscriber connected when it was published has read it. 1 to
	// MaxCapacity. Default 4096. The ring's slots are allocated as a
	// subscriber falls behind, up to Capacity.
	Capacity int `name:"queue_capacity" validate:"gte=1,lte=1048576"`
	// OnLag is what happens to a subscriber that falls behind by more than
	// Capacity. Default DropOldest.
	OnLag OnLag `name:"on_lag"`
	// AckMode combines broadcast acks for tracked publishes. Default AckFirst.
	AckMode AckMode `name:"ack_mode"`
}

// AckPropagation configures tracked publishing.
type AckPropagation struct {
	// Mode says whether pipelines bridge Ack/Nack through the topic.
	// Default PropagationDisabled.
	Mode PropagationMode
	// MaxInFlight bounds the unresolved tracked publishes per publisher: 1
	// to MaxInFlightLimit. Default 1024.
	MaxInFlight int `name:"max_in_flight" validate:"gte=1,lte=1048576"`
	// Timeout resolves a tracked publish as TimedOut when no outcome arrived
	// in time. Default 30s; at least 1ms, at most MaxTimeout (24h).
	Timeout time.Duration `validate:"gte=1ms,lte=24h"`
}

// Options configures one topic. The zero value, after WithDefaults, is a
// balanced-only topic with a 1024-message queue that blocks when full.
type Options struct {
	// Mode is BalancedOnly (default), BroadcastOnly or Mixed.
	Mode Mode
	// Balanced applies to BalancedOnly and Mixed topics.
	Balanced BalancedPolicy
	// Broadcast applies to BroadcastOnly and Mixed topics.
	Broadcast BroadcastPolicy
	// AckPropagation applies to tracked publishers of the topic.
	AckPropagation AckPropagation `name:"ack_propagation"`
}

// WithDefaults returns o with every zero capacity, MaxInFlight and Timeout
// replaced by its default. Enum fields default through their zero values.
func (o Options) WithDefaults() Options {
	if o.Balanced.Capacity == 0 {
		o.Balanced.Capacity = DefaultBalancedCapacity
	}
	if o.Broadcast.Capacity == 0 {
		o.Broadcast.Capacity = DefaultBroadcastCapacity
	}
	if o.AckPropagation.MaxInFlight == 0 {
		o.AckPropagation.MaxInFlight = DefaultMaxInFlight
	}
	if o.AckPropagation.Timeout == 0 {
		o.AckPropagation.Timeout = DefaultTimeout
	}
	return o
}

// Validate checks o (call WithDefaults first) and returns nil or a
// [validate.Errors] naming every broken rule with the YAML field names, for
// example "balanced.queue_capacity must be ≥ 1" or "broadcast.ack_mode all
// requires broadcast.on_lag disconnect". The ack_mode all rules are: the
// topic must be broadcast_only, on_lag must be disconnect and
// ack_propagation.mode must be auto.
func (o Options) Validate() error { return o.ValidateAs("") }

// ValidateAs is Validate with every field path rooted at prefix (for
// example "topics.ingress.policies").
func (o Options) ValidateAs(prefix string) error {
	field := func(f string) string {
		if prefix == "" {
			return f
		}
		return prefix + "." + f
	}
	var extra validate.Errors
	enum := func(f string, v int, names []string) {
		if v < 0 || v >= len(names) {
			extra = append(extra, validate.Field(field(f), "oneof", fmt.Sprintf("must be one of %v", names)))
		}
	}
	enum("mode", int(o.Mode), modeNames)
	enum("balanced.on_full", int(o.Balanced.OnFull), onFullNames)
	enum("broadcast.on_lag", int(o.Broadcast.OnLag), onLagNames)
	enum("broadcast.ack_mode", int(o.Broadcast.AckMode), ackModeNames)
	enum("ack_propagation.mode", int(o.AckPropagation.Mode), propagationNames)
	if o.Broadcast.AckMode == AckAll {
		if o.Mode != BroadcastOnly {
			extra = append(extra, validate.Field(field("broadcast.ack_mode"), "requires",
				"all requires mode broadcast_only, not "+o.Mode.String()))
		}
		if o.Broadcast.OnLag != Disconnect {
			extra = append(extra, validate.Field(field("broadcast.ack_mode"), "requires",
				"all requires broadcast.on_lag disconnect"))
		}
		if o.AckPropagation.Mode != PropagationAuto {
			extra = append(extra, validate.Field(field("broadcast.ack_mode"), "requires",
				"all requires ack_propagation.mode auto"))
		}
	}
	var extraErr error
	if len(extra) > 0 {
		extraErr = extra
	}
	return validate.Join(validate.Struct(prefix, &o), extraErr)
}

// TrackedOptions configures one [TrackedPublisher]. Zero fields take the
// topic's AckPropagation values, and FailureLogInterval its default.
type TrackedOptions struct {
	// MaxInFlight bounds unresolved publishes; Publish waits and TryPublish
	// reports MaxInFlightReached at the bound. Zero (the default) takes the
	// topic's ack_propagation.max_in_flight; at most MaxInFlightLimit.
	MaxInFlight int `name:"max_in_flight" validate:"gte=0,lte=1048576"`
	// Timeout resolves a publish as TimedOut when no outcome arrived in time.
	// Zero takes the topic's ack_propagation.timeout; a timeout set must be
	// at least 1ms (a shorter one would keep the publisher's timer firing
	// without pause) and at most MaxTimeout (24h).
	Timeout time.Duration `validate:"omitempty,gte=1ms,lte=24h"`
	// OnFull is the balanced full-queue policy of Publish and PublishFunc
	// (a per-publisher override of balanced.on_full). Default Block.
	OnFull OnFull `name:"on_full"`
	// Logger receives the publisher's events: a done callback of
	// PublishFunc (or its siblings) that panicked, or that ended its
	// goroutine (runtime.Goexit), is logged there at error level, a burst
	// of them kept to a few lines (see FailureLogInterval). Nil means
	// slog.Default().
	Logger *slog.Logger `name:"-" validate:"-"`
	// FailureLogInterval keeps a burst of failing done callbacks to a few
	// log lines: the publisher logs the first done that panicked at once,
	// with its stack, then, for FailureLogInterval after it, only counts
	// the like ones; the next line carries how many were held back
	// (held_back), and Close logs what is still held back. A done that
	// ends its goroutine (runtime.Goexit) is held back the same way, each
	// goroutine (timeouts, Close) apart. Default 10s
	// (DefaultFailureLogInterval); at most MaxFailureLogInterval (1h); a
	// negative value logs every one, one line each.
	FailureLogInterval time.Duration `name:"failure_log_interval" validate:"lte=1h"`
}

// WithDefaults returns o with a zero FailureLogInterval replaced by
// DefaultFailureLogInterval; its other zero fields take the topic's
// AckPropagation values when the publisher is made, which o does not
// know.
func (o TrackedOptions) WithDefaults() TrackedOptions {
	if o.FailureLogInterval == 0 {
		o.FailureLogInterval = DefaultFailureLogInterval
	}
	return o
}

// Validate returns nil or a [validate.Errors] naming every broken rule
// (a negative MaxInFlight, a Timeout other than 0 below 1ms, an unknown
// OnFull, a FailureLogInterval past MaxFailureLogInterval).
func (o TrackedOptions) Validate() error { return validateTracked(o) }

func validateTracked(o TrackedOptions) error {
	var extra error
	if o.OnFull < 0 || int(o.OnFull) >= len(onFullNames) {
		extra = validate.Field("on_full", "oneof", fmt.Sprintf("must be one of %v", onFullNames))
	}
	return validate.Join(validate.Struct("", &o), extra)
}

// SubscriberOptions tunes one subscription.
type SubscriberOptions struct {
	// OnRelease, when set, is called by a backend that lets go of part of
	// what the subscription reads (a Kafka topic's balanced member whose
	// partition a rebalance revokes) and waits, up to its own bound
	// (kafkatopic's Options.RevokeTimeout), for the messages of that part
	// the subscriber received and has not settled. The subscriber should
	// hurry their settlement: a pipeline source (package topic/source)
	// has its batchers emit their open batches at once. done (nil: none)
	// is called once the wait is over, however it ends, and what was
	// settled is committed. OnRelease is called only
	// while such messages are held and the wait is not zero, never while
	// the subscription is closing; it must not block, nor call back into
	// the subscription. On a Kafka backend, an OnRelease or done that
	// panics or ends its goroutine (runtime.Goexit) is logged at error
	// level and the revoke goes on as if it had returned. The in-memory
	// and Pulsar backends never call it:
	// nothing they do waits for the messages a subscriber holds. Nil: the
	// backend just waits.
	OnRelease func() (done func()) `name:"-" validate:"-"`
	// Reach, when set, hears whether the subscription can read from its
	// broker (see [ReachObserver]): the Kafka and Pulsar backends report
	// to it, the in-memory backend never does. Nil: nobody hears.
	Reach ReachObserver `name:"-" validate:"-"`
}

// WithDefaults returns o: no field has a default.
func (o SubscriberOptions) WithDefaults() SubscriberOptions { return o }

// Validate returns nil: every value of every field is valid.
func (o SubscriberOptions) Validate() error { return nil }
