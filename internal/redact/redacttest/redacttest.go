// Package redacttest checks that a value holding credentials shows none of
// them however a program prints it.
package redacttest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// verbs are the fmt verbs Forms prints with: those a String method covers,
// %#v, and those that reach a value's fields past its String (%d, %x, %X).
var verbs = []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X"}

// Forms returns v printed every way a program prints a value: with each
// verb of fmt, alone and as an exported field of a structure; encoded by
// encoding/json; and logged at DEBUG by slog's text and JSON handlers.
// Each form starts with how it was printed.
func Forms(v any) []string {
	type holder struct{ Field any }
	var forms []string
	for _, verb := range verbs {
		forms = append(forms,
			"fmt "+verb+": "+fmt.Sprintf(verb, v),
			"fmt "+verb+" as a field: "+fmt.Sprintf(verb, holder{v}))
	}
	j, err := json.Marshal(v)
	forms = append(forms, fmt.Sprintf("json: %s (error %v)", j, err))
	for name, h := range map[string]func(*strings.Builder) slog.Handler{
		"text": func(b *strings.Builder) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
		"json": func(b *strings.Builder) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
	} {
		var b strings.Builder
		slog.New(h(&b)).Debug("value", "v", v, "holder", holder{v})
		forms = append(forms, "slog "+name+": "+b.String())
	}
	return forms
}

// NoSecret fails t for each form of v (see Forms) that shows one of the
// secrets, as written or hex-encoded.
func NoSecret(t testing.TB, what string, v any, secrets ...string) {
	t.Helper()
	for _, f := range Forms(v) {
		for _, s := range secrets {
			if strings.Contains(f, s) || strings.Contains(f, fmt.Sprintf("%x", s)) || strings.Contains(f, fmt.Sprintf("%X", s)) {
				t.Errorf("%s shows a secret: %s", what, f)
			}
		}
	}
}
