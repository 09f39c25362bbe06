package stats

import (
	"sync"
	"time"
)

// Calls dates the calls a stage's workers have in flight (a processor's
// chunk, a batch processor's batch) for whoever reads the stage's
// counters. A worker's counters tell whether it holds a call and which
// one (a value that changes from one call to the next, such as the
// messages taken in so far), never when the call began, which would cost
// a reading of the clock per call: a call is dated from the first reading
// that saw it. An age is so short by up to the time between two readings;
// the pipeline reads every Options.StallCheckInterval.
//
// Only readers use it, never the workers: it adds nothing to the hot
// path. Safe for concurrent use.
type Calls struct {
	mu    sync.Mutex
	calls []call
}

// call is what the readings saw of one worker: the call it held and when
// a reading first saw it (zero when it held none).
type call struct {
	id    uint64
	since time.Time
}

// NewCalls returns the calls of a stage of workers workers.
func NewCalls(workers int) *Calls { return &Calls{calls: make([]call, workers)} }

// Age records that worker i, at now, holds the call id (inFlight) or
// none, and returns how long that call has been running: from the first
// reading that saw it to now, 0 when it holds none or is seen for the
// first time.
func (c *Calls) Age(i int, id uint64, inFlight bool, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &c.calls[i]
	switch {
	case !inFlight:
		*w = call{}
		return 0
	case w.since.IsZero() || w.id != id:
		*w = call{id: id, since: now}
		return 0
	}
	return max(0, now.Sub(w.since))
}
