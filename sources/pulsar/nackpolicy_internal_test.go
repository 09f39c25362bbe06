package pulsar

import (
	"log/slog"
	"math"
	"testing"
	"time"
)

// fixedBackoff returns the same delay for every redelivery count.
type fixedBackoff time.Duration

func (f fixedBackoff) Next(uint32) time.Duration { return time.Duration(f) }

// brokenBackoff panics on every call.
type brokenBackoff struct{}

func (brokenBackoff) Next(uint32) time.Duration { panic("broken") }

// Guarantee: the policy the client is given returns what the
// application's returns, raised to 1ms; when the application's panics,
// the consumer's NackRedeliveryDelay, or the client's one minute when none
// is set. It allocates nothing.
func TestNackPolicyRaisesToAMillisecondAndFallsBackOnAPanic(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	cases := []struct {
		user  fixedBackoff
		delay time.Duration
		want  time.Duration
	}{
		{0, 0, time.Millisecond},
		{-1, 0, time.Millisecond},
		{2, 0, time.Millisecond},
		{fixedBackoff(time.Millisecond), 0, time.Millisecond},
		{fixedBackoff(3 * time.Second), 0, 3 * time.Second},
	}
	for _, c := range cases {
		if got := newNackPolicy(c.user, c.delay, quiet).Next(4); got != c.want {
			t.Errorf("policy returning %v gives %v, want %v", time.Duration(c.user), got, c.want)
		}
	}
	if got := newNackPolicy(brokenBackoff{}, 250*time.Millisecond, quiet).Next(1); got != 250*time.Millisecond {
		t.Errorf("a panicking policy with a 250ms nack delay gives %v", got)
	}
	if got := newNackPolicy(brokenBackoff{}, 0, quiet).Next(1); got != time.Minute {
		t.Errorf("a panicking policy without a nack delay gives %v, want the client's 1m", got)
	}
	p := newNackPolicy(fixedBackoff(0), 0, quiet)
	if n := testing.AllocsPerRun(100, func() { p.Next(3) }); n != 0 {
		t.Errorf("Next allocates %v times a call", n)
	}
}

// Guarantee: with EnableDefaultNackBackoffPolicy, the delay the client
// waits for a nacked message is pulsar-client-go's default backoff for
// every redelivery count: 1s doubled per redelivery, at most 10 minutes,
// never less than the delay of a lower count (the client's own overflows
// into negative delays from a count of 34).
func TestDefaultNackBackoffStaysWithinOneSecondAndTenMinutesForEveryCount(t *testing.T) {
	want := func(n uint32) time.Duration {
		if n < 10 {
			return min(time.Second<<n, 10*time.Minute)
		}
		return 10 * time.Minute
	}
	p := newNackPolicy(defaultNackBackoff{}, 0, slog.New(slog.DiscardHandler))
	prev := time.Duration(0)
	for _, n := range []uint32{0, 1, 2, 9, 10, 33, 34, 35, 36, 38, 54, 63, 64, 65, 1 << 20, math.MaxUint32 - 1, math.MaxUint32} {
		got := p.Next(n)
		if got != want(n) || got < prev {
			t.Errorf("Next(%d) = %v, want %v (1s doubled per redelivery, at most 10m, never decreasing)", n, got, want(n))
		}
		prev = got
	}
}
