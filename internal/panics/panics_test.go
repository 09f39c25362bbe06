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

// Guarantee: a function wrapped by Guard is called with its arguments, and
// its panic is recovered and logged once with the attributes; the wrapper
// returns normally. Guard of nil is nil.
func TestGuardRecoversThePanicOfTheWrappedFunction(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var got int
	f := panics.Guard(func(_ context.Context, n int) {
		got = n
		panic("boom")
	}, log, "hook panicked", slog.String("hook", "H"))
	f(context.Background(), 7)
	if got != 7 {
		t.Fatalf("wrapped function got %d, want 7", got)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"hook":"H"`) || !strings.Contains(out, `"panic":"boom"`) {
		t.Fatalf("want one line naming the hook and the panic, got %q", out)
	}
	if panics.Guard[int](nil, log, "hook panicked") != nil {
		t.Fatal("Guard(nil) is not nil")
	}
}
