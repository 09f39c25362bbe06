package producer

import (
	"fmt"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/validate"
)

// Default values of the producer options. A zero field in Options, Flow or
// Restart takes the matching default.
const (
	DefaultConcurrency    = 1
	DefaultFlowInitial    = 100
	DefaultFlowThreshold  = DefaultFlowInitial / 2
	DefaultFlowRefill     = DefaultFlowInitial - DefaultFlowThreshold
	DefaultMaxRestarts    = 3
	DefaultRestartWindow  = 5 * time.Second
	DefaultRestartBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	// DefaultMaxConsecutiveFailures is the default
	// Restart.MaxConsecutiveFailures (raised to MaxRestarts+1 when the
	// user allows more restarts within Window).
	DefaultMaxConsecutiveFailures = 5
	// DefaultMaxFailingTime is the default Restart.MaxFailingTime.
	DefaultMaxFailingTime = 2 * time.Minute
)

// Upper bounds of the producer options, enforced by validation. Each is far
// above what a pipeline needs; they keep a mistyped value (an extra zero, a
// unit confusion) from allocating without limit or starting a goroutine
// storm. The struct tags of Options, Flow, RateLimit and Restart repeat these
// numbers.
const (
	// MaxConcurrency bounds Options.Concurrency: producer stages, each a
	// source consumer (a Kafka group member) with two goroutines.
	MaxConcurrency = 1024
	// MaxFlowPermits bounds Flow.Initial and Flow.Refill: permits a
	// consumer may be granted at once. The processors' queues are sized to
	// hold a whole window, so the window is memory allocated up front.
	MaxFlowPermits = 1 << 16
	// MaxRateLimitAllowed bounds RateLimit.Allowed, the token bucket's size.
	MaxRateLimitAllowed = 1 << 30
	// MaxRestartCount bounds Restart.MaxRestarts and
	// Restart.MaxConsecutiveFailures.
	MaxRestartCount = 1 << 16
	// MaxFailingTimeLimit bounds Restart.MaxFailingTime.
	MaxFailingTimeLimit = 24 * time.Hour
	// MaxRateLimitInterval bounds RateLimit.Interval.
	MaxRateLimitInterval = 24 * time.Hour
	// MaxRestartWindow bounds Restart.Window.
	MaxRestartWindow = 24 * time.Hour
	// MaxBackoffLimit bounds Restart.Backoff and Restart.MaxBackoff.
	MaxBackoffLimit = time.Hour
)

// Options configure the producer stages of a pipeline.
type Options[T any] struct {
	// Source supplies the messages. Its Run method is called once per
	// producer stage. Nil makes a pipeline that is fed only through
	// Pipeline.Push. Validation never looks inside it (a source may be
	// in use by a running pipeline); a source checks its own options in
	// its Info.
	Source Source[T] `validate:"-"`
	// Concurrency is the number of producer stages, each running the
	// source's Run concurrently (for Kafka: consumer-group members).
	// Default 1, at most MaxConcurrency (1024).
	Concurrency int `validate:"gte=1,lte=1024"`
	// Flow is the permit window of every consumer (feed) of the source.
	// Default {Initial: 100, Threshold: 50, Refill: 50}, except that a
	// source's Info.Window chooses the default Initial (the Kafka source:
	// 512).
	Flow Flow
	// RateLimit caps how many messages all producer stages together hand to
	// the processors per interval. Nil (the default) means no limit. It can
	// be changed while the pipeline runs with Pipeline.SetRateLimit.
	RateLimit *RateLimit
	// Restart governs what happens when the source's Run returns an error.
	Restart Restart
}

// Flow is the permit window every consumer of a source works within: a
// consumer is granted Initial permits when it starts; one permit is charged
// each time one of its messages leaves the stage buffer for the processors;
// when its remaining permits fall to Threshold it is granted Refill more. A
// consumer therefore never has more than max(Initial, Threshold+Refill)
// messages fetched-but-not-dispatched or allowed to be fetched.
type Flow struct {
	// Initial is the number of permits a consumer is granted when it starts.
	// At least 2 (Threshold must fit below it), at most MaxFlowPermits
	// (65536). Default 100.
	Initial int `validate:"gte=2,lte=65536"`
	// Threshold is the remaining-permit level at which a refill is granted.
	// It must be at least 1 and less than Initial. Default Initial/2 (50
	// with the default Initial).
	Threshold int `validate:"omitempty,gte=1,ltfield=Initial"`
	// Refill is the number of permits granted by each refill, at most
	// MaxFlowPermits (65536). Default Initial-Threshold (50 with the default
	// Initial), which keeps the window at Initial.
	Refill int `validate:"gte=1,lte=65536"`
}

// MaxWindow is the largest number of permits a consumer can hold:
// max(Initial, Threshold+Refill).
func (f Flow) MaxWindow() int { return max(f.Initial, f.Threshold+f.Refill) }

// RateLimit allows Allowed messages per Interval on average, shared by
// every producer stage of the pipeline: a token bucket of Allowed tokens
// refilled at Allowed/Interval. Over any stretch of time T it lets through
// at most Allowed + T·Allowed/Interval messages, so a full bucket (at the
// start, or after an idle spell) lets a burst of Allowed through at once,
// and one interval can see up to twice Allowed. A stage passes as many of
// its buffered messages as the bucket holds tokens at once and keeps the
// rest; from an empty bucket it waits for as many tokens as its next chunk
// needs.
type RateLimit struct {
	// Allowed is the number of messages per Interval. Required, ≥ 1, at most
	// MaxRateLimitAllowed (1073741824).
	Allowed int `validate:"gte=1,lte=1073741824"`
	// Interval is the length of the period. Required, > 0, at most
	// MaxRateLimitInterval (24h).
	Interval time.Duration `validate:"gt=0,lte=24h"`
}

// Restart governs how a failing source is restarted. When its Run returns an
// error (or panics), the stage waits a backoff (Backoff, doubling with each
// failure counted by the rules below, up to MaxBackoff) and calls Run again,
// once the failed run's messages have left the stage buffer.
//
// Three rules stop the pipeline with a *RestartError naming the rule that
// tripped; each is checked when a run fails (a run in progress is never
// interrupted):
//
//   - more than MaxRestarts failures within the sliding Window: a source
//     that fails fast, again and again;
//   - MaxConsecutiveFailures runs in a row that failed without delivering
//     a message, however long each took: a source that cannot connect,
//     where every attempt ends in a timeout;
//   - MaxFailingTime spent failing since the last message was delivered:
//     the time of the failed runs before they created their first feed
//     (connected), plus the backoffs between them. Time a run spent
//     connected does not count, so a source on an idle topic that loses
//     its connection now and then is not given up on by this rule.
//
// A run that delivered at least one message resets the last two rules.
type Restart struct {
	// MaxRestarts is how many restarts are tolerated within Window. Default
	// 3, at most MaxRestartCount (65536).
	MaxRestarts int `validate:"gte=1,lte=65536"`
	// Window is the period over which restarts are counted: a failure
	// counts until Window has passed since it (two failures exactly
	// Window apart are never in one window). Default 5s; a value set
	// must be above 0, at most MaxRestartWindow (24h).
	Window time.Duration `validate:"gt=0,lte=24h"`
	// Backoff is the wait before the first restart. Default 100ms; a
	// value set must be above 0, at most MaxBackoffLimit (1h).
	Backoff time.Duration `validate:"gt=0,lte=1h"`
	// MaxBackoff caps the doubling backoff. Default 5s, or Backoff if that
	// is larger; must be ≥ Backoff, at most MaxBackoffLimit (1h).
	MaxBackoff time.Duration `validate:"gtefield=Backoff,lte=1h"`
	// MaxConsecutiveFailures is how many runs in a row may fail without
	// delivering a message: the stage gives up when that many have.
	// Default 5, or MaxRestarts+1 when that is larger (so that this rule
	// never gives up on fast failures that MaxRestarts tolerates); at most
	// MaxRestartCount (65536).
	MaxConsecutiveFailures int `validate:"gte=1,lte=65536"`
	// MaxFailingTime is how long the stage may spend failing without
	// delivering a message (see Restart) before it gives up. Default 2m, at
	// most MaxFailingTimeLimit (24h).
	MaxFailingTime time.Duration `validate:"gt=0,lte=24h"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options[T]) WithDefaults() Options[T] {
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Flow.Initial == 0 {
		if o.Source != nil {
			info, _ := o.SourceInfo() // an error is Validate's to report
			o.Flow.Initial = info.Window
		}
	}
	o.Flow = o.Flow.WithDefaults()
	o.Restart = o.Restart.WithDefaults()
	return o
}

// WithDefaults returns f with every zero field replaced by its default:
// Initial 100, Threshold Initial/2, Refill Initial-Threshold. The zero Flow
// is therefore 100/50/50, and Flow{Initial: 10} is 10/5/5. A derived Refill
// is kept within 1..MaxFlowPermits, so that an Initial out of bounds is
// reported alone.
func (f Flow) WithDefaults() Flow {
	if f.Initial == 0 {
		f.Initial = DefaultFlowInitial
	}
	if f.Threshold == 0 && f.Initial > 0 {
		f.Threshold = f.Initial / 2
	}
	if f.Refill == 0 {
		f.Refill = min(max(1, f.Initial-f.Threshold), MaxFlowPermits)
	}
	return f
}

// validateDerived reports the problems struct tags cannot name well: a
// Threshold the user left to its default that cannot be derived from
// Initial. prefix roots the field paths. f carries its defaults.
func (f Flow) validateDerived(prefix string) error {
	if f.Threshold == 0 && f.Initial == 1 {
		// Set by WithDefaults from Initial: Threshold 0 is no user value.
		return validate.Field(join(prefix, "threshold"), "gte", fmt.Sprintf(
			"(derived as initial/2 = %d) must be ≥ 1; set %s ≥ 2", f.Initial/2, join(prefix, "initial")))
	}
	return nil
}

// Validate reports every broken rule of o, which carries its defaults (see
// WithDefaults): the struct tags, the rules tags cannot name well (a
// Threshold left to its default that cannot be derived from Initial), and
// the source's own options (the error of its Info). It returns nil or an
// error listing every problem (a validate.Errors value unless the source
// reports otherwise).
func (o Options[T]) Validate() error { return o.ValidateAs("") }

// ValidateAs is Validate with every field path rooted at path ("producer"
// in a pipeline). pipeline.New calls it.
func (o Options[T]) ValidateAs(path string) error {
	errs := []error{validate.Struct(path, &o), o.Flow.validateDerived(join(path, "flow"))}
	if o.Source != nil {
		_, err := o.SourceInfo()
		errs = append(errs, err)
	}
	return validate.Join(errs...)
}

// SourceInfo returns what o.Source's Info says (the zero Info and nil when
// Source is nil). A panic in Info is returned as an error wrapping
// *message.PanicError, so that a source that panics there is an invalid
// option (Validate reports it), not a crash.
func (o Options[T]) SourceInfo() (info Info, err error) {
	if o.Source == nil {
		return Info{}, nil
	}
	defer message.Recover(&err)
	return o.Source.Info()
}

func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

// WithDefaults returns r with every zero field replaced by its default.
func (r Restart) WithDefaults() Restart {
	if r.MaxRestarts == 0 {
		r.MaxRestarts = DefaultMaxRestarts
	}
	if r.Window == 0 {
		r.Window = DefaultRestartWindow
	}
	if r.Backoff == 0 {
		r.Backoff = DefaultRestartBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = max(DefaultMaxBackoff, r.Backoff)
	}
	if r.MaxConsecutiveFailures == 0 {
		// A MaxRestarts out of bounds is reported alone: the derived value
		// stays within bounds.
		r.MaxConsecutiveFailures = DefaultMaxConsecutiveFailures
		if r.MaxRestarts >= DefaultMaxConsecutiveFailures {
			r.MaxConsecutiveFailures = min(r.MaxRestarts, MaxRestartCount-1) + 1
		}
	}
	if r.MaxFailingTime == 0 {
		r.MaxFailingTime = DefaultMaxFailingTime
	}
	return r
}

// backoff is the wait before the restart that follows the n-th counted
// failure (n ≥ 1): Backoff doubled n-1 times, capped at MaxBackoff.
func (r Restart) backoff(n int) time.Duration {
	d := r.Backoff
	for i := 1; i < n && d < r.MaxBackoff; i++ {
		if d > r.MaxBackoff/2 {
			return r.MaxBackoff
		}
		d *= 2
	}
	return min(d, r.MaxBackoff)
}
