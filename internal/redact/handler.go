package redact

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
)

// Handler returns a handler that hands h every record with its message
// and attribute values redacted as s.Text redacts a text: the user
// information of URLs and the secrets of s taken out, lines joined. A
// value of a kind other than string, group or number (an error, a
// structure, bytes) is rendered first, as fmt prints it and as slog's text
// and JSON handlers write it, and replaced by the redacted text of the
// first rendering that redacting changes.
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
// of a kind other than string, group or number is rendered first (see
// Handler), so that an error, a *url.URL or bytes holding a credential
// are caught too.
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
		for _, t := range renderings(v.Any()) {
			if red := s.Text(t); red != t {
				return slog.String(a.Key, red)
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// renderings returns the texts a handler may write for x: what fmt prints,
// and, where it differs, what slog's text handler writes (the bytes of a
// byte slice as a string, the text of an encoding.TextMarshaler) and what
// its JSON handler writes (the JSON encoding of anything but an error).
// A method that panics adds nothing.
func renderings(x any) (ts []string) {
	ts = []string{fmt.Sprint(x)}
	defer func() { _ = recover() }()
	if m, ok := x.(encoding.TextMarshaler); ok {
		if b, err := m.MarshalText(); err == nil {
			ts = append(ts, string(b))
		}
	} else if rv := reflect.ValueOf(x); rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
		ts = append(ts, string(rv.Bytes()))
	}
	if _, ok := x.(error); !ok {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(x) == nil {
			ts = append(ts, strings.TrimSuffix(b.String(), "\n"))
		}
	}
	return ts
}
