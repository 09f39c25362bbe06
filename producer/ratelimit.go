package producer

import (
	"errors"

	"golang.org/x/time/rate"
)

// ErrNoRateLimit is returned by UpdateRateLimit and ResetRateLimit when no
// rate limit is in force: there is no field to change and no bucket to
// refill (Broadway's update_rate_limiting refuses the same).
var ErrNoRateLimit = errors.New("producer: no rate limit set")

// UpdateRateLimit changes the rate limit in force through fn, which is
// given a copy of it to change (for example only Allowed): the change is
// atomic with respect to SetRateLimit, ResetRateLimit and other updates.
// When fn returns an error (the caller's validation, say), the limit stays
// as it was and the error is returned. Like SetRateLimit it keeps the
// tokens the bucket holds and wakes the stages waiting on it. It returns
// ErrNoRateLimit when no limit is set.
func (p *runtime[T]) UpdateRateLimit(fn func(rl *RateLimit) error) error {
	return p.gate.replace(func(old *bucket) (*bucket, error) {
		rl := old.rl
		if err := fn(&rl); err != nil || rl == old.rl {
			return nil, err
		}
		// Tokens and reservations carry over to the new limit.
		old.lim.SetLimit(limitOf(rl))
		old.lim.SetBurst(rl.Allowed)
		return &bucket{lim: old.lim, rl: rl, changed: make(chan struct{})}, nil
	})
}

// ResetRateLimit refills the token bucket (Broadway's update_rate_limiting
// with reset): the whole Allowed may pass at once, whatever was used in
// the current interval, and stages waiting for tokens reserve again from
// the full bucket. It returns ErrNoRateLimit when no limit is set.
func (p *runtime[T]) ResetRateLimit() error {
	return p.gate.replace(func(old *bucket) (*bucket, error) {
		return &bucket{lim: rate.NewLimiter(limitOf(old.rl), old.rl.Allowed), rl: old.rl, changed: make(chan struct{})}, nil
	})
}

// replace puts in force the bucket next makes from the one in force, under
// the gate's lock, and wakes the stages waiting on the old one; next
// returning nil changes nothing. It returns ErrNoRateLimit when no limit
// is set, and next's error.
func (g *gate) replace(next func(old *bucket) (*bucket, error)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.cur.Load()
	if old.lim == nil {
		return ErrNoRateLimit
	}
	b, err := next(old)
	if b == nil || err != nil {
		return err
	}
	g.cur.Store(b)
	close(old.changed)
	return nil
}

// limitOf is rl as a rate.Limit: tokens per second.
func limitOf(rl RateLimit) rate.Limit {
	return rate.Limit(float64(rl.Allowed) / rl.Interval.Seconds())
}
