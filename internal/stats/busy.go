package stats

import "time"

// Busy estimates the time one worker goroutine spends on its units of work
// (a processor's chunks, a batch processor's batches) while reading the
// clock on one unit in every only: the 1st, then every every-th. A timed
// unit counts its own duration; each untimed unit after it counts that
// same duration, but the untimed units between two timed ones never count
// more than the time that passed between the end of the first and the
// start of the second. So the estimate never exceeds the time from the
// worker's first unit to its latest reading of the clock, however few
// units it handled, and with units of even length it is their time.
//
// The untimed units are counted when the next timed unit ends, or when
// the worker stops (Stop): an untimed unit costs neither a clock reading
// nor a store, and Load lags behind by at most every-1 units.
//
// Only the owner goroutine calls Begin, End and Stop; Load is safe from
// any goroutine.
type Busy struct {
	total Counter // nanoseconds
	every uint32
	since uint32        // units begun since the latest timed one, that one included; 0 before the first
	start time.Time     // when the latest timed unit began
	took  time.Duration // how long it took, once it ended
	rest  time.Duration // the untimed units before the latest timed one, stored when it ends
}

// NewBusy returns an estimate that times one unit in every (every unit
// when every ≤ 1).
func NewBusy(every uint32) Busy { return Busy{every: max(every, 1)} }

// Begin starts a unit. It returns the time the unit began when the unit is
// timed, and the zero time otherwise; give what it returned to End once
// the unit is over.
func (b *Busy) Begin() time.Time {
	// since in [1, every): an untimed unit. Small enough to be inlined.
	if b.since-1 < b.every-1 {
		b.since++
		return time.Time{}
	}
	return b.beginTimed()
}

// beginTimed starts a timed unit.
func (b *Busy) beginTimed() time.Time {
	now := time.Now()
	b.rest = b.untimed(now)
	b.since, b.start = 1, now
	return now
}

// End ends the unit Begin started at start and returns its duration when
// it was timed (0 otherwise).
func (b *Busy) End(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return b.endTimed(start)
}

// endTimed ends a timed unit.
func (b *Busy) endTimed(start time.Time) time.Duration {
	b.took = time.Since(start)
	b.total.Add(uint64(b.took + b.rest))
	b.rest = 0
	return b.took
}

// Stop counts the untimed units begun since the latest timed one, with one
// reading of the clock. The owner calls it once its last unit has ended,
// before it returns.
func (b *Busy) Stop() {
	if b.since > 1 {
		b.total.Add(uint64(b.untimed(time.Now())))
	}
	b.since = 0
}

// untimed is the estimate for the units begun after the latest timed one
// and over by now: each as long as that one, and together no longer than
// the time from its end to now.
func (b *Busy) untimed(now time.Time) time.Duration {
	if b.since <= 1 {
		return 0
	}
	return max(0, min(b.took*time.Duration(b.since-1), now.Sub(b.start)-b.took))
}

// Load returns the estimate so far.
func (b *Busy) Load() time.Duration { return time.Duration(b.total.Load()) }
