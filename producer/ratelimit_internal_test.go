package producer

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// rateProducer is a push-only producer with rl, enough to drive its gate.
func rateProducer(rl *RateLimit) *Producer[int] {
	return New(Options[int]{RateLimit: rl}.WithDefaults(), Config[int]{Name: "rate"})
}

// drainedProducer is rateProducer(rl) whose bucket is empty: a take of
// the whole of it has just passed.
func drainedProducer(t *testing.T, rl RateLimit) *Producer[int] {
	t.Helper()
	p := rateProducer(&rl)
	if n, err := p.gate.take(context.Background(), rl.Allowed); n != rl.Allowed || err != nil {
		t.Fatalf("first take = %d, %v; want the full bucket", n, err)
	}
	return p
}

// takeLater starts a take of n tokens on a goroutine of its own and
// returns where it sends how many it took.
func takeLater(p *Producer[int], n int) <-chan int {
	got := make(chan int, 1)
	go func() {
		k, _ := p.gate.take(context.Background(), n)
		got <- k
	}()
	return got
}

// Guarantee: ResetRateLimit refills the bucket at once, and a stage waiting
// for tokens of the old bucket takes them from the full one without
// waiting for the interval.
func TestResetRateLimitRefillsTheBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := drainedProducer(t, RateLimit{Allowed: 5, Interval: time.Hour})
		start := time.Now()
		got := takeLater(p, 5)
		synctest.Wait() // the stage waits for the next interval
		select {
		case n := <-got:
			t.Fatalf("take returned %d with an empty bucket", n)
		default:
		}
		if err := p.ResetRateLimit(); err != nil {
			t.Fatalf("ResetRateLimit: %v", err)
		}
		if n := <-got; n != 5 {
			t.Fatalf("take after reset = %d, want 5", n)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the waiting stage waited %v after the reset, want 0", waited)
		}
		if rl := p.RateLimit(); *rl != (RateLimit{Allowed: 5, Interval: time.Hour}) {
			t.Errorf("limit after reset %+v, want it unchanged", rl)
		}
	})
}

// Guarantee: messages pass as soon as the bucket holds a token for them (a
// single token lets one through): a
// stage that wants more than the bucket holds takes what it holds at once
// rather than wait for the rest; an empty bucket is waited on for a chunk
// (as many as wanted, up to the bucket size), not a token at a time.
func TestRateLimitPassesWhatTheBucketHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := rateProducer(&RateLimit{Allowed: 3, Interval: time.Hour})
		ctx := context.Background()
		if n, _ := p.gate.take(ctx, 1); n != 1 {
			t.Fatalf("first take = %d, want 1", n)
		}
		start := time.Now()
		if n, _ := p.gate.take(ctx, 5); n != 2 {
			t.Fatalf("take of 5 with 2 tokens left = %d, want the 2", n)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("waited %v with tokens in the bucket, want 0", waited)
		}
		if n, _ := p.gate.take(ctx, 5); n != 3 {
			t.Fatalf("take of 5 from an empty bucket of 3 = %d, want 3", n)
		}
		// Three tokens at three an hour (the bucket counts tokens in floating
		// point, so allow it a millisecond).
		if waited := time.Since(start); waited < time.Hour-time.Millisecond || waited > time.Hour {
			t.Errorf("waited %v for a chunk from the empty bucket, want 1h", waited)
		}
		// A single token (a third of an interval, and a little more for
		// the floating point) lets one message through at once.
		time.Sleep(21 * time.Minute)
		start = time.Now()
		if n, _ := p.gate.take(ctx, 5); n != 1 || time.Since(start) != 0 {
			t.Fatalf("take of 5 with 1 token = %d after %v, want 1 at once", n, time.Since(start))
		}
	})
}

// Guarantee: UpdateRateLimit changes only what fn changes, keeps the
// tokens the bucket holds (no fresh burst), applies the new rate to a
// waiting stage, and leaves the limit alone when fn fails.
func TestUpdateRateLimitChangesOneField(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := rateProducer(&RateLimit{Allowed: 4, Interval: 4 * time.Second})
		ctx := context.Background()
		if n, _ := p.gate.take(ctx, 4); n != 4 {
			t.Fatalf("first take = %d, want 4", n)
		}
		errNo := errors.New("refused")
		if err := p.UpdateRateLimit(func(rl *RateLimit) error { rl.Allowed = 99; return errNo }); !errors.Is(err, errNo) {
			t.Fatalf("UpdateRateLimit with a failing fn = %v", err)
		}
		if rl := p.RateLimit(); rl.Allowed != 4 {
			t.Fatalf("a refused update changed the limit to %+v", rl)
		}
		// Interval 4s → 1s: one token per second becomes four.
		if err := p.UpdateRateLimit(func(rl *RateLimit) error { rl.Interval = time.Second; return nil }); err != nil {
			t.Fatalf("UpdateRateLimit: %v", err)
		}
		if rl := p.RateLimit(); *rl != (RateLimit{Allowed: 4, Interval: time.Second}) {
			t.Fatalf("limit %+v, want Allowed kept and Interval 1s", rl)
		}
		start := time.Now()
		if n, _ := p.gate.take(ctx, 1); n != 1 {
			t.Fatalf("take = %d", n)
		}
		// The bucket was empty (no fresh burst): one token at 4 per second.
		if waited := time.Since(start); waited != 250*time.Millisecond {
			t.Errorf("waited %v for a token, want 250ms at the new rate", waited)
		}
	})
	if err := rateProducer(nil).UpdateRateLimit(func(*RateLimit) error { return nil }); !errors.Is(err, ErrNoRateLimit) {
		t.Errorf("UpdateRateLimit without a limit = %v, want ErrNoRateLimit", err)
	}
	if err := rateProducer(nil).ResetRateLimit(); !errors.Is(err, ErrNoRateLimit) {
		t.Errorf("ResetRateLimit without a limit = %v, want ErrNoRateLimit", err)
	}
}

// Guarantee: a stage taking tokens never fails because the limit changed
// under it: UpdateRateLimit (or SetRateLimit) lowering Allowed, the
// bucket's size, between the moment take reads it and the moment it
// reserves, makes take reserve again under the new limit. An error from
// take ends the stage's dispatcher for good: its buffer is never
// dispatched again and its source, out of permits, stalls.
func TestRateLimitTakeSurvivesAConcurrentlyLoweredBurst(t *testing.T) {
	// Tokens refill within nanoseconds, so take never waits long.
	p := rateProducer(&RateLimit{Allowed: 64, Interval: time.Nanosecond})
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			allowed := 64
			if i%2 == 1 {
				allowed = 1
			}
			_ = p.UpdateRateLimit(func(rl *RateLimit) error { rl.Allowed = allowed; return nil })
		}
	}()
	defer func() { close(stop); <-done }()
	for range 200000 {
		if _, err := p.gate.take(ctx, 64); err != nil {
			t.Fatalf("take while the limit changes: %v", err)
		}
	}
}

// Guarantee: a limit changed while running, by SetRateLimit or
// UpdateRateLimit, resizes the bucket to the new Allowed and refills it at
// the new Allowed per Interval from then on.
func TestChangedRateLimitSetsBucketSizeAndRate(t *testing.T) {
	for name, change := range map[string]func(p *Producer[int], rl RateLimit) error{
		"SetRateLimit": func(p *Producer[int], rl RateLimit) error { p.SetRateLimit(&rl); return nil },
		"UpdateRateLimit": func(p *Producer[int], rl RateLimit) error {
			return p.UpdateRateLimit(func(cur *RateLimit) error { cur.Allowed = rl.Allowed; return nil })
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := rateProducer(&RateLimit{Allowed: 2, Interval: time.Hour})
				ctx := context.Background()
				if n, _ := p.gate.take(ctx, 2); n != 2 {
					t.Fatalf("first take = %d, want 2", n)
				}
				if err := change(p, RateLimit{Allowed: 10, Interval: time.Hour}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(30 * time.Minute)
				start := time.Now()
				if n, _ := p.gate.take(ctx, 20); n != 5 || time.Since(start) != 0 {
					t.Fatalf("half an interval after the change: took %d after %v, want 5 at once", n, time.Since(start))
				}
				time.Sleep(2 * time.Hour)
				start = time.Now()
				if n, _ := p.gate.take(ctx, 20); n != 10 || time.Since(start) != 0 {
					t.Fatalf("from a full bucket: took %d after %v, want the new Allowed, 10, at once", n, time.Since(start))
				}
			})
		})
	}
}

// Guarantee: a stage waiting for tokens when the limit changes gives back
// what it had reserved and waits only for the tokens it needs under the
// new limit: the change costs no tokens.
func TestALimitChangedDuringAWaitCostsNoTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := drainedProducer(t, RateLimit{Allowed: 10, Interval: 10 * time.Second})
		start := time.Now()
		got := takeLater(p, 10)
		synctest.Wait() // it waits 10s for 10 tokens at 1/s
		p.SetRateLimit(&RateLimit{Allowed: 10, Interval: 5 * time.Second})
		if n := <-got; n != 10 {
			t.Fatalf("take after the change = %d, want 10", n)
		}
		if waited, want := time.Since(start), 5*time.Second; waited != want {
			t.Errorf("waited %v for 10 tokens at 2/s from an empty bucket, want %v", waited, want)
		}
	})
}

// Guarantee: RateLimit returns a copy: changing it changes neither the
// limit in force nor what RateLimit returns next.
func TestRateLimitReturnsACopy(t *testing.T) {
	want := RateLimit{Allowed: 5, Interval: time.Second}
	p := rateProducer(&want)
	p.RateLimit().Allowed = 99
	if got := p.RateLimit(); *got != want {
		t.Fatalf("RateLimit() = %+v after a caller changed its result, want %+v", *got, want)
	}
}
