package pulsarnack_test

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/pulsarnack"
)

// Guarantee: the precision chosen for a delay never rounds a deadline
// earlier than the delay itself (2^bit ms at most the delay), and is the
// client's own default wherever that default already keeps the delay.
func TestBitKeepsTheDelay(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0}, {0, 0}, {time.Millisecond, 0}, {2 * time.Millisecond, 1}, {3 * time.Millisecond, 1},
		{100 * time.Millisecond, 6}, {255 * time.Millisecond, 7}, {256 * time.Millisecond, 8},
		{time.Second, 8}, {time.Hour, 8},
	} {
		got := *pulsarnack.Bit(c.d)
		if got != c.want {
			t.Errorf("Bit(%v) = %d, want %d", c.d, got, c.want)
		}
		if c.d >= time.Millisecond && time.Duration(1<<got)*time.Millisecond > c.d {
			t.Errorf("Bit(%v) = %d: 2^bit ms is above the delay", c.d, got)
		}
	}
	if got := pulsarnack.MaxBit(time.Hour); got != 21 {
		t.Errorf("MaxBit(1h) = %d, want 21 (2^21 ms ≈ 35 min)", got)
	}
}
