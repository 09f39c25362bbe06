package panics_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/panics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Guarantee: a panic under a deferred Log is recovered and logged as one
// error line with the attributes, the panic value and the stack; without a
// panic nothing is logged.
func TestLogRecoversAndLogsOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	func() {
		defer panics.Log(context.Background(), log, "hook panicked", slog.String("feed", "f1"))
		panic("boom")
	}()
	out := buf.String()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want one log line, got %q", out)
	}
	for _, want := range []string{`"level":"ERROR"`, `"msg":"hook panicked"`, `"feed":"f1"`, `"panic":"boom"`, `"stack":"goroutine`} {
		if !strings.Contains(out, want) {
			t.Errorf("log line %s lacks %s", out, want)
		}
	}
	buf.Reset()
	func() {
		defer panics.Log(context.Background(), log, "hook panicked")
	}()
	if buf.Len() != 0 {
		t.Fatalf("logged without a panic: %q", buf.String())
	}
}
