package producer

import (
	"time"
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
)

// Options configure the producer stages of a pipeline.
type Options[T any] struct {
	// Source supplies the messages. Its Run method is called once per
	// producer stage. Nil makes a pipeline that is fed only through
	// Pipeline.Push.
	Source Source[T] `name:"source"`
	// Concurrency is the number of producer stages, each running the
	// source's Run concurrently (for Kafka: consumer-group members).
	// Default 1.
	Concurrency int `name:"concurrency" validate:"gte=1"`
	// Flow is the permit window of every consumer (feed) of the source.
	// Default {Initial: 100, Threshold: 50, Refill: 50}, except that a
	// source implementing WindowAdvisor chooses the default Initial (the
	// Kafka source: 512).
	Flow Flow `name:"flow"`
	// RateLimit caps how many messages all producer stages together hand to
	// the processors per interval. Nil (the default) means no limit. It can
	// be changed while the pipeline runs with Pipeline.SetRateLimit.
	RateLimit *RateLimit `name:"rateLimit"`
	// Restart governs what happens when the source's Run returns an error.
	Restart Restart `name:"restart"`
}

// Flow is the permit window of seed 002: a consumer is granted Initial
// permits when it starts; one permit is charged each time one of its messages
// leaves the stage buffer for the processors; when its remaining permits fall
// to Threshold it is granted Refill more. A consumer therefore never has more
// than max(Initial, Threshold+Refill) messages fetched-but-not-dispatched or
// allowed to be fetched.
type Flow struct {
	// Initial is the number of permits a consumer is granted when it starts.
	// At least 2 (Threshold must fit below it). Default 100.
	Initial int `name:"initial" validate:"gte=2"`
	// Threshold is the remaining-permit level at which a refill is granted.
	// It must be less than Initial. Default Initial/2 (50 with the default
	// Initial).
	Threshold int `name:"threshold" validate:"gte=1,ltfield=Initial"`
	// Refill is the number of permits granted by each refill. Default
	// Initial-Threshold (50 with the default Initial), which keeps the
	// window at Initial.
	Refill int `name:"refill" validate:"gte=1"`
}

// MaxWindow is the largest number of permits a consumer can hold:
// max(Initial, Threshold+Refill).
func (f Flow) MaxWindow() int { return max(f.Initial, f.Threshold+f.Refill) }

// RateLimit allows at most Allowed messages per Interval, shared by every
// producer stage of the pipeline (a token bucket of Allowed tokens refilled
// at Allowed/Interval).
type RateLimit struct {
	// Allowed is the number of messages per Interval. Required, ≥ 1.
	Allowed int `name:"allowed" validate:"gte=1"`
	// Interval is the length of the period. Required, > 0.
	Interval time.Duration `name:"interval" validate:"gt=0"`
}

// Restart governs how a failing source is restarted. When its Run returns an
// error (or panics), the stage waits a backoff (Backoff, doubling with each
// failure counted in the sliding Window, up to MaxBackoff) and calls Run
// again, once the failed run's messages have left the stage buffer. More
// than MaxRestarts failures within Window stop the pipeline with a
// *RestartError.
type Restart struct {
	// MaxRestarts is how many restarts are tolerated within Window. Default 3.
	MaxRestarts int `name:"maxRestarts" validate:"gte=1"`
	// Window is the period over which restarts are counted. Default 5s.
	Window time.Duration `name:"window" validate:"gt=0"`
	// Backoff is the wait before the first restart. Default 100ms.
	Backoff time.Duration `name:"backoff" validate:"gt=0"`
	// MaxBackoff caps the doubling backoff. Default 5s, or Backoff if that
	// is larger; must be ≥ Backoff.
	MaxBackoff time.Duration `name:"maxBackoff" validate:"gtefield=Backoff"`
}

// WithDefaults returns o with every zero field replaced by its default.
func (o Options[T]) WithDefaults() Options[T] {
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Flow.Initial == 0 {
		if wa, ok := o.Source.(WindowAdvisor); ok {
			o.Flow.Initial = wa.DefaultWindow()
		}
	}
	o.Flow = o.Flow.WithDefaults()
	o.Restart = o.Restart.WithDefaults()
	return o
}

// WithDefaults returns f with every zero field replaced by its default:
// Initial 100, Threshold Initial/2, Refill Initial-Threshold. The zero Flow
// is therefore 100/50/50, and Flow{Initial: 10} is 10/5/5.
func (f Flow) WithDefaults() Flow {
	if f.Initial == 0 {
		f.Initial = DefaultFlowInitial
	}
	if f.Threshold == 0 && f.Initial > 0 {
		f.Threshold = f.Initial / 2
	}
	if f.Refill == 0 {
		// At least 1, so that a bad Threshold is reported alone.
		f.Refill = max(1, f.Initial-f.Threshold)
	}
	return f
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
	return r
}
