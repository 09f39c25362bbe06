package pulsar

import (
	"log/slog"
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
