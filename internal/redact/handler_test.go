package redact_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/internal/redact"
)

// marshalsText prints as a placeholder with fmt but as its text (the
// credential) through encoding.TextMarshaler, as slog's text handler
// writes it.
type marshalsText struct{ text string }

func (m marshalsText) String() string               { return "marshalsText" }
func (m marshalsText) MarshalText() ([]byte, error) { return []byte(m.text), nil }
func (m marshalsText) MarshalJSON() ([]byte, error) { return json.Marshal(m.text) }

// Guarantee: a credential in an attribute value that slog's handlers write
// otherwise than fmt prints it (bytes, which fmt prints as numbers and the
// text handler as a string and the JSON one in base64; raw JSON; a value
// with its own text or JSON encoding) shows in no line, with the
// attribute given to the record, to WithAttrs or in a group.
func TestHandlerTakesCredentialsOutOfEveryEncodingOfAValue(t *testing.T) {
	const secret = "s3cret-pw-77"
	s := redact.NewSecrets(secret)
	values := map[string]any{
		"bytes":   []byte("pw " + secret),
		"raw":     json.RawMessage(`{"pw":"` + secret + `"}`),
		"marshal": marshalsText{secret},
	}
	for name, h := range map[string]func(*strings.Builder) slog.Handler{
		"text": func(b *strings.Builder) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *strings.Builder) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		for kind, v := range values {
			var b strings.Builder
			l := slog.New(redact.Handler(h(&b), s))
			l.Info("record", "v", v)
			l.With("v", v).Info("with")
			l.Info("group", slog.Group("g", "v", v))
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			if len(lines) != 3 {
				t.Fatalf("%s handler, %s: %d lines, want 3:\n%s", name, kind, len(lines), b.String())
			}
			for _, line := range lines {
				if strings.Contains(line, secret) || strings.Contains(line, "czNjcmV0LXB3LTc3") {
					t.Errorf("%s handler, %s: the line shows the credential: %s", name, kind, line)
				}
				if !strings.Contains(line, redact.Masked) {
					t.Errorf("%s handler, %s: the line lost the value: %s", name, kind, line)
				}
			}
		}
	}
}

// jsonOnly prints as a placeholder with fmt but shows its field in JSON,
// as slog's JSON handler writes it.
type jsonOnly struct{ Pw string }

func (jsonOnly) String() string { return "jsonOnly" }

// valuer logs as the text it holds.
type valuer struct{ text string }

func (v valuer) LogValue() slog.Value { return slog.StringValue(v.text) }

// Guarantee: the handler takes credentials out of a record's message, of
// the attributes logged after WithGroup, of a value that resolves to one
// (slog.LogValuer), and of a value only its JSON encoding shows, HTML
// characters and all.
func TestHandlerTakesCredentialsOutOfMessagesGroupsAndResolvedValues(t *testing.T) {
	const secret = "pw<&>s3cret"
	var b strings.Builder
	l := slog.New(redact.Handler(slog.NewJSONHandler(&b, nil), redact.NewSecrets(secret)))
	l.Info("login refused for " + secret)
	l.WithGroup("g").Info("group", "v", "with "+secret)
	l.Info("valuer", "v", valuer{"with " + secret})
	l.Info("json", "v", jsonOnly{secret})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), b.String())
	}
	for _, line := range lines {
		if strings.Contains(line, "s3cret") || !strings.Contains(line, redact.Masked) {
			t.Errorf("the line shows the credential or lost the value: %s", line)
		}
	}
}
