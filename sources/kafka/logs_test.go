package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// logRecord is one log line as a handler received it, with the attributes
// of the logger it went through (Logger.With) before its own.
type logRecord struct {
	Level slog.Level
	Msg   string
	Keys  []string // attribute keys, in order, With attributes first
	Text  string   // message and attributes as key=value
}

// logBook is a slog handler that keeps every record, safe for concurrent
// use; loggers derived with With share its book.
type logBook struct {
	mu    *sync.Mutex
	recs  *[]logRecord
	attrs []slog.Attr
}

func newLogBook() logBook { return logBook{mu: &sync.Mutex{}, recs: &[]logRecord{}} }

func (b logBook) logger() *slog.Logger { return slog.New(b) }

func (b logBook) Enabled(context.Context, slog.Level) bool { return true }

func (b logBook) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message}
	var text strings.Builder
	text.WriteString(r.Message)
	var add func(a slog.Attr) bool
	add = func(a slog.Attr) bool {
		if v := a.Value.Resolve(); a.Key == "" && v.Kind() == slog.KindGroup {
			// Inlined, as slog's handlers do (internal/logattr's lists).
			for _, g := range v.Group() {
				add(g)
			}
			return true
		}
		rec.Keys = append(rec.Keys, a.Key)
		fmt.Fprintf(&text, " %s=%v", a.Key, a.Value.Resolve())
		return true
	}
	for _, a := range b.attrs {
		add(a)
	}
	r.Attrs(add)
	rec.Text = text.String()
	b.mu.Lock()
	*b.recs = append(*b.recs, rec)
	b.mu.Unlock()
	return nil
}

func (b logBook) WithAttrs(as []slog.Attr) slog.Handler {
	b.attrs = append(b.attrs[:len(b.attrs):len(b.attrs)], as...)
	return b
}

func (b logBook) WithGroup(string) slog.Handler { return b }

// records returns a copy of the records kept so far.
func (b logBook) records() []logRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]logRecord(nil), *b.recs...)
}

// find returns the records for which match holds.
func (b logBook) find(match func(logRecord) bool) []logRecord {
	var out []logRecord
	for _, r := range b.records() {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}
