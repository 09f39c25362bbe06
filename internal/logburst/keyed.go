package logburst

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The attributes naming the first and the last position (a Kafka offset,
// a Pulsar message id) of the lines a Keyed held back since the previous
// line of their key.
const (
	HeldFirstKey = "held_back_first"
	HeldLastKey  = "held_back_last"
)

// MaxKeys is the most keys a Keyed keeps unless its Max says otherwise.
const MaxKeys = 4096

// Keyed holds back the lines of one kind per key (a partition), and
// remembers where the lines it held back were: each line names a position
// (a Kafka offset, a Pulsar message id), and the line that follows a
// burst carries, beside HeldBackKey, the positions of the first and the
// last held back (HeldFirstKey, HeldLastKey), so that an operator can
// still find the records. It is meant for rare lines that come in bursts,
// such as records that do not decode: a line takes a lock. Its zero value
// logs at INFO with an empty message on slog.Default(): set its fields
// before the first line. Safe for concurrent use.
type Keyed[K comparable] struct {
	// Every is how long after a key's line like lines of the key are
	// held back. Zero means Interval; a negative value holds nothing
	// back.
	Every time.Duration
	// Max is the most keys kept; zero means MaxKeys. A line of a new key
	// past it forgets the key whose last line is the oldest, after logging
	// what that key held back.
	Max int
	// Log is where the lines go; nil means slog.Default().
	Log *slog.Logger
	// Level is the level of the lines.
	Level slog.Level
	// Msg is the message of the lines; followed by HeldBackSuffix, it is
	// that of the lines saying what a key held back when it is forgotten
	// (Forget, Flush).
	Msg string

	mu sync.Mutex
	m  map[K]*burst
}

// burst is what a Keyed knows of one key.
type burst struct {
	logged      time.Time   // when the key's last line was logged
	held        uint64      // the lines held back since
	first, last slog.Value  // their positions
	key         []slog.Attr // the attributes naming the key
}

// Line logs the line of key k, at position pos, with the attributes key
// (naming k; kept, for the line that may say what k held back) followed
// by attrs, unless a line of k was logged less than Every ago, in which
// case it only counts it and its position. A line logged after some of
// its key were held back carries their count and their first and last
// positions.
func (kd *Keyed[K]) Line(ctx context.Context, k K, key []slog.Attr, pos slog.Value, attrs ...slog.Attr) {
	every := kd.Every
	switch {
	case every == 0:
		every = Interval
	case every < 0:
		kd.logger().LogAttrs(ctx, kd.Level, kd.Msg, append(key[:len(key):len(key)], attrs...)...)
		return
	}
	now := time.Now()
	kd.mu.Lock()
	b := kd.m[k]
	if b != nil && now.Sub(b.logged) < every {
		if b.held == 0 {
			b.first = pos
		}
		b.held++
		b.last = pos
		kd.mu.Unlock()
		return
	}
	var gone *burst
	if b == nil {
		gone = kd.makeRoom()
		b = &burst{key: key}
		kd.m[k] = b
	}
	held, first, last := b.held, b.first, b.last
	b.held, b.first, b.last = 0, slog.Value{}, slog.Value{}
	b.logged = now
	kd.mu.Unlock()
	if gone != nil {
		kd.heldLine(ctx, gone)
	}
	line := append(key[:len(key):len(key)], attrs...)
	if held > 0 {
		line = append(line, slog.Uint64(HeldBackKey, held), slog.Attr{Key: HeldFirstKey, Value: first}, slog.Attr{Key: HeldLastKey, Value: last})
	}
	kd.logger().LogAttrs(ctx, kd.Level, kd.Msg, line...)
}

// makeRoom makes the map, or room in it for one more key: past Max, it
// forgets the key whose last line is the oldest and returns what it knew
// of it when it held lines back. Called with mu held.
func (kd *Keyed[K]) makeRoom() *burst {
	if kd.m == nil {
		kd.m = map[K]*burst{}
		return nil
	}
	limit := kd.Max
	if limit <= 0 {
		limit = MaxKeys
	}
	if len(kd.m) < limit {
		return nil
	}
	var oldest K
	var ob *burst
	for k, b := range kd.m {
		if ob == nil || b.logged.Before(ob.logged) {
			oldest, ob = k, b
		}
	}
	delete(kd.m, oldest)
	if ob.held == 0 {
		return nil
	}
	return ob
}

// Forget logs what key k held back since its last line, if anything (the
// message followed by HeldBackSuffix, the key's attributes, HeldBackKey,
// HeldFirstKey and HeldLastKey), and forgets k: its next line is logged
// at once. Its owner calls it when it lets go of k (a partition revoked).
func (kd *Keyed[K]) Forget(ctx context.Context, k K) {
	kd.mu.Lock()
	b := kd.m[k]
	delete(kd.m, k)
	kd.mu.Unlock()
	if b != nil && b.held > 0 {
		kd.heldLine(ctx, b)
	}
}

// Flush logs, for every key with lines held back since its last line,
// what it held back (see Forget), and forgets every key. Its owner calls
// it as it stops, so that no count is left unsaid.
func (kd *Keyed[K]) Flush(ctx context.Context) {
	kd.mu.Lock()
	m := kd.m
	kd.m = nil
	kd.mu.Unlock()
	for _, b := range m {
		if b.held > 0 {
			kd.heldLine(ctx, b)
		}
	}
}

func (kd *Keyed[K]) heldLine(ctx context.Context, b *burst) {
	kd.logger().LogAttrs(ctx, kd.Level, kd.Msg+HeldBackSuffix, append(b.key[:len(b.key):len(b.key)],
		slog.Uint64(HeldBackKey, b.held), slog.Attr{Key: HeldFirstKey, Value: b.first}, slog.Attr{Key: HeldLastKey, Value: b.last})...)
}

func (kd *Keyed[K]) logger() *slog.Logger {
	if kd.Log == nil {
		return slog.Default()
	}
	return kd.Log
}
