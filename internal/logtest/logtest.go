// Package logtest keeps what a test's logger writes, so that a test can
// check which lines an event produced. Only tests import it.
package logtest

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/internal/logburst"
)

// Lines is an io.Writer keeping what a slog handler writes, one record per
// Write (as slog's text and JSON handlers write). It is safe for
// concurrent use; the zero value is ready.
type Lines struct {
	mu    sync.Mutex
	lines []string
}

// Write keeps p as one record.
func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	return len(p), nil
}

// All returns the records written so far.
func (l *Lines) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// Matching returns the records written so far that contain s.
func (l *Lines) Matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// Count returns how many records written so far contain every one of
// subs.
func (l *Lines) Count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			n++
		}
	}
	return n
}

// Want fails t unless exactly n records written so far contain every
// one of subs; what names them in the failure, which shows every record.
func (l *Lines) Want(t testing.TB, n int, what string, subs ...string) {
	t.Helper()
	if got := l.Count(subs...); got != n {
		t.Errorf("%d %s, want %d:\n%s", got, what, n, strings.Join(l.All(), ""))
	}
}

// Told returns how many records written so far contain every one of
// subs, and how many events they tell of: one per record, but for a
// record saying what a logburst limiter held back (its message ends with
// logburst.HeldBackSuffix), plus the count of the lines held back each
// record carries (logburst.HeldBackKey).
func (l *Lines) Told(subs ...string) (records, events int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			continue
		}
		records++
		if !strings.Contains(line, logburst.HeldBackSuffix) {
			events++
		}
		if _, after, ok := strings.Cut(line, " "+logburst.HeldBackKey+"="); ok {
			n, _ := strconv.Atoi(strings.Fields(after)[0])
			events += n
		}
	}
	return records, events
}

// Sum returns the sum of the integer attribute key (a text handler's
// " key=n") over the records written so far that contain every one of
// subs, and how many of them carry it.
func (l *Lines) Sum(key string, subs ...string) (sum, records int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			continue
		}
		if _, after, ok := strings.Cut(line, " "+key+"="); ok {
			n, _ := strconv.Atoi(strings.Fields(after)[0])
			sum += n
			records++
		}
	}
	return sum, records
}

// Repeated returns the records written more than once, but for their
// time (a text handler's leading "time=… " attribute), each once.
func (l *Lines) Repeated() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]int{}
	var out []string
	for _, line := range l.lines {
		if rest, ok := strings.CutPrefix(line, "time="); ok {
			_, line, _ = strings.Cut(rest, " ")
		}
		if seen[line]++; seen[line] == 2 {
			out = append(out, line)
		}
	}
	return out
}

// CaptureDefault makes slog.Default() write its records, as text, to the
// Lines it returns until t ends, when the previous default comes back.
// Tests that use it must not run in parallel.
func CaptureDefault(t testing.TB) *Lines {
	l := new(Lines)
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(l, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return l
}

// Records is a slog.Handler that keeps every record it is given, at every
// level, for a test to count. It is safe for concurrent use; the zero
// value is ready.
type Records struct {
	mu   sync.Mutex
	recs []slog.Record
}

// Enabled reports true: every level is kept.
func (r *Records) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of rec.
func (r *Records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return nil
}

// WithAttrs returns r: the records keep their own attributes only.
func (r *Records) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup returns r.
func (r *Records) WithGroup(string) slog.Handler { return r }

// Count returns how many records at level carry msg.
func (r *Records) Count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level && rec.Message == msg {
			n++
		}
	}
	return n
}

// Errors returns the "error" attributes that are errors, in order, of
// the records at level that carry msg.
func (r *Records) Errors(level slog.Level, msg string) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, rec := range r.recs {
		if rec.Level != level || rec.Message != msg {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
				errs = append(errs, err)
			}
			return true
		})
	}
	return errs
}
