package pipeline

import (
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// ErrNilRateLimitFunc is returned by UpdateRateLimit when its function is
// nil: the limit in force stays as it was.
var ErrNilRateLimitFunc = errors.New("pipeline: update rate limit: nil function")

// UpdateRateLimit changes some fields of the rate limit in force while the
// pipeline runs (Broadway's update_rate_limiting): fn is given a copy of
// the current limit, and what it leaves becomes the limit once validated,
// atomically with respect to other changes. For example
//
//	p.UpdateRateLimit(func(rl *producer.RateLimit) { rl.Allowed = 500 })
//
// The tokens the bucket holds are kept (use ResetRateLimit to refill it).
// An invalid result leaves the limit as it was and is returned as a
// validate.Errors value; without a rate limit the error wraps
// producer.ErrNoRateLimit (set one with SetRateLimit). A nil fn is refused
// with ErrNilRateLimitFunc. A panic in fn is recovered and returned as an
// error wrapping a *message.PanicError, and the limit stays as it was:
// the pipeline goes on under it. fn runs while other changes of the rate
// limit wait, so it must not call the rate-limit methods itself.
func (p *Pipeline[In, Out]) UpdateRateLimit(fn func(rl *producer.RateLimit)) error {
	if !p.built() {
		return ErrNotBuilt
	}
	if fn == nil {
		return ErrNilRateLimitFunc
	}
	err := p.prod.UpdateRateLimit(func(rl *producer.RateLimit) (err error) {
		defer message.Recover(&err)
		fn(rl)
		return validate.Struct("rateLimit", rl)
	})
	if err != nil {
		return fmt.Errorf("pipeline: update rate limit: %w", err)
	}
	return nil
}

// ResetRateLimit refills the rate limit's token bucket (Broadway's
// update_rate_limiting with reset: true): the whole Allowed may pass at
// once, whatever the current interval used, and producer stages waiting
// for tokens go on from the full bucket. Without a rate limit the error
// wraps producer.ErrNoRateLimit.
func (p *Pipeline[In, Out]) ResetRateLimit() error {
	if !p.built() {
		return ErrNotBuilt
	}
	if err := p.prod.ResetRateLimit(); err != nil {
		return fmt.Errorf("pipeline: reset rate limit: %w", err)
	}
	return nil
}
