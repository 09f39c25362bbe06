// Package logburst keeps a burst of like warnings to one log line per
// interval. Some failures come one per message, by the thousand, from a
// single event: a rebalance that takes a partition away while thousands of
// its messages are in flight fails the settling of each of them; a
// database a handler writes to going down fails every message. A Limiter
// logs the first at once, counts the like ones that follow within its
// interval, and has the next line it logs say how many it held back
// (attribute "held_back"); Flush logs what is still held back when its
// owner stops. The owner keeps the exact count in its stats.
package logburst

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Interval is how long after a line a Limiter holds like lines back unless
// its Every says otherwise.
const Interval = 10 * time.Second

// HeldBackKey is the attribute that counts the lines held back since the
// previous one was logged.
const HeldBackKey = "held_back"

// HeldBackSuffix ends the message of the line Kind.FlushHeld logs: the
// kind's message, then this.
const HeldBackSuffix = " (held back since the last line)"

// Limiter holds back the lines of one kind of warning logged within its
// interval (Every) of the previous one. Its zero value is ready to use,
// and safe for concurrent use. A line held back costs two atomic
// operations and a reading of the clock: no lock, no allocation.
type Limiter struct {
	// Every is how long after a line the Limiter holds like lines back.
	// Zero means Interval; a negative value holds nothing back: every
	// line is logged. Set it before the first line; it must not change
	// after.
	Every time.Duration

	mu sync.Mutex
	// epoch is a moment just before the first line, set under mu before
	// last is first stored and never changed after: whoever loads a
	// non-zero last may read it.
	epoch time.Time
	// last is when the last line was logged, as the time since epoch
	// (never zero); zero before the first and after Flush. Stored under
	// mu.
	last atomic.Int64
	// held counts the lines held back since.
	held atomic.Uint64
}

// Log logs msg with attrs at level on log unless a line of l was logged
// less than its interval ago, in which case it only counts it. A line
// logged after some were held back carries their count as HeldBackKey.
func (l *Limiter) Log(ctx context.Context, log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	every := l.Every
	switch {
	case every == 0:
		every = Interval
	case every < 0:
		log.LogAttrs(ctx, level, msg, attrs...)
		return
	}
	if last := l.last.Load(); last != 0 && time.Since(l.epoch)-time.Duration(last) < every {
		l.held.Add(1)
		return
	}
	l.mu.Lock()
	now := time.Now()
	if l.epoch.IsZero() {
		l.epoch = now.Add(-time.Nanosecond)
	}
	since := now.Sub(l.epoch)
	if last := l.last.Load(); last != 0 && since-time.Duration(last) < every {
		// Another line was logged since the check above.
		l.mu.Unlock()
		l.held.Add(1)
		return
	}
	// The count is taken before the line's time is published: a line
	// held back because of this one (its check saw the new time) counts
	// towards the next line, never towards this one.
	held := l.held.Swap(0)
	l.last.Store(int64(since))
	l.mu.Unlock()
	if held > 0 {
		attrs = append(attrs, slog.Uint64(HeldBackKey, held))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
}

// Flush logs, when lines were held back since the last one logged, msg
// at level with their count as HeldBackKey, and starts l afresh. Its owner
// calls it as it stops, so that no count is left unsaid.
func (l *Limiter) Flush(ctx context.Context, log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	l.mu.Lock()
	l.last.Store(0)
	held := l.held.Swap(0)
	l.mu.Unlock()
	if held > 0 {
		log.LogAttrs(ctx, level, msg, append(attrs, slog.Uint64(HeldBackKey, held))...)
	}
}

// Kind is the Limiter of one kind of line, with the level and the message
// every line of the kind has. Its zero value logs at INFO with an empty
// message: set Level and Msg, and Every if need be, before the first line.
type Kind struct {
	Limiter
	// Level is the level of the kind's lines.
	Level slog.Level
	// Msg is the message of the kind's lines.
	Msg string
}

// NewKind returns the Kind of the lines logged at level with message msg,
// holding like lines back for every (see Limiter.Every).
func NewKind(every time.Duration, level slog.Level, msg string) Kind {
	return Kind{Limiter: Limiter{Every: every}, Level: level, Msg: msg}
}

// Line logs the kind's line with attrs, or counts it (see Limiter.Log).
func (k *Kind) Line(ctx context.Context, log *slog.Logger, attrs ...slog.Attr) {
	k.Log(ctx, log, k.Level, k.Msg, attrs...)
}

// FlushHeld logs, when lines of the kind were held back since the last one
// logged, the kind's message followed by HeldBackSuffix, at its level,
// with their count as HeldBackKey (see Limiter.Flush).
func (k *Kind) FlushHeld(ctx context.Context, log *slog.Logger) {
	k.Flush(ctx, log, k.Level, k.Msg+HeldBackSuffix)
}
