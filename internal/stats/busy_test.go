package stats

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// Guarantee: a Busy estimate never exceeds the time from the first unit's
// start to the latest reading of the clock (a timed unit's end, or Stop),
// whatever the units' durations and the idle time between them, and it
// counts each timed unit in full; when every unit takes as long and the
// worker is never idle, it is that time exactly once stopped.
func TestBusyNeverExceedsTheTimeItCovers(t *testing.T) {
	for _, every := range []uint32{1, 3, 64} {
		for seed := range uint64(20) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(every)))
				even := seed == 0 // units of 1ms back to back
				b := NewBusy(every)
				began := time.Now()
				var timed time.Duration
				units := 1 + rng.IntN(200)
				for range units {
					start := b.Begin()
					if even {
						time.Sleep(time.Millisecond)
					} else {
						time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
					}
					timed += b.End(start)
					if got, ran := b.Load(), time.Since(began); got > ran || got < timed {
						t.Fatalf("every %d seed %d: %v after %v, of which %v timed", every, seed, got, ran, timed)
					}
					if !even {
						time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
					}
				}
				b.Stop()
				got, ran := b.Load(), time.Since(began)
				if got > ran || got < timed || even && got != ran {
					t.Fatalf("every %d seed %d: %v once stopped after %d units in %v, of which %v timed", every, seed, got, units, ran, timed)
				}
			})
		}
	}
}

// Guarantee: Busy times one unit in every (the 1st, then every every-th);
// the units in between are not timed and store nothing until the next
// timed one ends, and no unit allocates.
func TestBusyTimesOneUnitInEvery(t *testing.T) {
	b := NewBusy(4)
	b.End(b.Begin())
	stored := b.Load()
	for range 3 {
		if start := b.Begin(); !start.IsZero() {
			t.Fatal("a unit between two timed ones was timed")
		}
		if d := b.End(time.Time{}); d != 0 || b.Load() != stored {
			t.Fatalf("an untimed unit returned %v and stored %v", d, b.Load()-stored)
		}
	}
	if start := b.Begin(); start.IsZero() {
		t.Fatal("the 5th unit was not timed")
	}
	if allocs := testing.AllocsPerRun(1000, func() { b.End(b.Begin()) }); allocs != 0 {
		t.Fatalf("%v allocations per unit", allocs)
	}
}

// Guarantee: when the units take as long as each other, the estimate once
// stopped is their time exactly, idle time between them left out, however
// many units there were since the latest timed one.
func TestBusyCountsUnitsOfEvenLengthAndNotTheIdleTime(t *testing.T) {
	for units := 1; units <= 9; units++ {
		synctest.Test(t, func(t *testing.T) {
			b := NewBusy(4)
			for range units {
				start := b.Begin()
				time.Sleep(time.Millisecond)
				b.End(start)
				time.Sleep(time.Millisecond)
			}
			b.Stop()
			if got, want := b.Load(), time.Duration(units)*time.Millisecond; got != want {
				t.Fatalf("%d units of 1ms, each followed by 1ms idle, one in 4 timed: %v once stopped, want %v", units, got, want)
			}
		})
	}
}

// Guarantee: NewBusy(0) times every unit, as NewBusy(1) does.
func TestBusyOfZeroTimesEveryUnit(t *testing.T) {
	b := NewBusy(0)
	for i := range 3 {
		start := b.Begin()
		if start.IsZero() {
			t.Fatalf("unit %d of NewBusy(0) was not timed", i+1)
		}
		b.End(start)
	}
}
