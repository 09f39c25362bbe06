package stats

import (
	"testing"
	"time"
)

// Guarantee: a call is aged from the first reading that saw it, as long as
// readings see the same call in flight; a new call (another id), or a
// worker seen idle, starts again from 0; and workers are aged apart.
func TestCallsAgeACallFromItsFirstReading(t *testing.T) {
	c := NewCalls(2)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		worker int
		id     uint64
		busy   bool
		now    int
		want   time.Duration
	}{
		{0, 10, true, 0, 0},                // first seen
		{0, 10, true, 5, 5 * time.Second},  // the same call
		{1, 3, true, 6, 0},                 // another worker
		{0, 10, true, 9, 9 * time.Second},  // still the same
		{0, 20, true, 10, 0},               // a new call
		{0, 20, true, 12, 2 * time.Second}, //
		{0, 20, false, 13, 0},              // idle
		{0, 20, true, 14, 0},               // busy again: seen anew
		{1, 3, true, 16, 10 * time.Second}, // the other worker's call aged apart
		{1, 3, true, 15, 9 * time.Second},  // a reading that took its time earlier
		{0, 20, true, 13, 0},               // never negative
		{1, 0, false, 20, 0},               // idle
		{1, 0, true, 21, 0},                // a call of id 0: seen anew
		{1, 0, true, 23, 2 * time.Second},  //
	}
	for i, s := range steps {
		if got := c.Age(s.worker, s.id, s.busy, at(s.now)); got != s.want {
			t.Fatalf("step %d (worker %d, call %d, in flight %v, at %ds): age %v, want %v", i, s.worker, s.id, s.busy, s.now, got, s.want)
		}
	}
}
