// Package logburst keeps a burst of like warnings to one log line per
// interval. Some failures come one per message, by the thousand, from a
// single event: a rebalance that takes a partition away while thousands of
// its messages are in flight fails the settling of each of them. A
// Limiter logs the first at once, counts the like ones that follow within
// its interval, and has the next line it logs say how many it held back
// (attribute "held_back"); Flush logs what is still held back when its
// owner stops. The owner keeps the exact count in its stats.
package logburst

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Interval is how long after a line a Limiter holds like lines back.
const Interval = 10 * time.Second

// HeldBackKey is the attribute that counts the lines held back since the
// previous one was logged.
const HeldBackKey = "held_back"

// Limiter holds back the lines of one kind of warning logged within
// Interval of the previous one. Its zero value is ready to use, and safe
// for concurrent use.
type Limiter struct {
	mu   sync.Mutex
	last time.Time // when the last line was logged; zero before the first
	held uint64    // lines held back since
}

// Log logs msg with attrs at level on log unless a line of l was logged
// less than Interval ago, in which case it only counts it. A line logged
// after some were held back carries their count as HeldBackKey.
func (l *Limiter) Log(ctx context.Context, log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	now := time.Now()
	l.mu.Lock()
	if !l.last.IsZero() && now.Sub(l.last) < Interval {
		l.held++
		l.mu.Unlock()
		return
	}
	held := l.held
	l.last, l.held = now, 0
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
	held := l.held
	l.last, l.held = time.Time{}, 0
	l.mu.Unlock()
	if held > 0 {
		log.LogAttrs(ctx, level, msg, append(attrs, slog.Uint64(HeldBackKey, held))...)
	}
}
