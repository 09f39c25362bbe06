package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler returns a handler that hands h every record with its message
// and attribute values redacted as s.Text redacts a text: the user
// information of URLs and the secrets of s taken out, lines joined. A
// value of a kind other than string, group or number (an error, a
// structure) is formatted first and replaced by the redacted text when
// redacting changes it.
func Handler(h slog.Handler, s Secrets) slog.Handler { return &handler{h: h, s: s} }

type handler struct {
	h slog.Handler
	s Secrets
}

func (r *handler) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.s.Text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.s.Attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = r.s.Attr(a)
	}
	return &handler{h: r.h.WithAttrs(red), s: r.s}
}

func (r *handler) WithGroup(name string) slog.Handler {
	return &handler{h: r.h.WithGroup(name), s: r.s}
}

// Attr returns a with its value redacted as Text redacts a text. A value
// of a kind other than string, group or number is formatted first, so
// that an error or a *url.URL holding a credential is caught too.
func (s Secrets) Attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, s.Text(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = s.Attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		t := fmt.Sprint(v.Any())
		if red := s.Text(t); red != t {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
