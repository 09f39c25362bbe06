package message_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/message"
)

// where is a source's metadata that describes itself for logs.
type where struct {
	topic  string
	offset int64
}

func (w *where) LogValue() slog.Value {
	return slog.GroupValue(slog.String("topic", w.topic), slog.Int64("offset", w.offset))
}

// logLine is the text line logger writes for a failed message m.
func logLine[T any](m *message.Message[T]) string {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Warn("message failed", slog.Any("message", m))
	return buf.String()
}

// Guarantee: a message's log line locates it: it carries what its
// source's metadata says of where the message came from when that
// metadata describes itself for logs (slog.LogValuer), and it names a
// batcher and batch key only when a processor set them, so that a
// pipeline without batchers does not read "batcher=default".
func TestAMessagesLogLineLocatesItAndNamesOnlyTheRoutingItWasGiven(t *testing.T) {
	m := message.New("payload", nil, 7)
	m.Metadata = &where{topic: "orders", offset: 42}
	m.Fail(errors.New("store down"))
	line := logLine(m)
	for _, want := range []string{"message.id=7", "message.status=failed", `message.error="store down"`,
		"message.source.topic=orders", "message.source.offset=42"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %s", line, want)
		}
	}
	if strings.Contains(line, "batcher") || strings.Contains(line, "batch_key") || strings.Contains(line, "payload") {
		t.Errorf("line %q names routing it was not given, or the payload", line)
	}

	m.SetBatcher("s3")
	m.SetBatchKey("eu")
	if line := logLine(m); !strings.Contains(line, "message.batcher=s3") || !strings.Contains(line, "message.batch_key=eu") {
		t.Errorf("line %q does not name the batcher and batch key the message was given", line)
	}

	plain := message.New(1, nil, 8)
	plain.Metadata = struct{ n int }{1} // says nothing of itself
	if line := logLine(plain); strings.Contains(line, "source") {
		t.Errorf("line %q describes metadata that does not describe itself", line)
	}
}
