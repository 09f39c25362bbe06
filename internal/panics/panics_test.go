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

// traceKey is a context key whose value ctxHandler logs.
type traceKey struct{}

// ctxHandler logs the trace of the context it handles a record with.
type ctxHandler struct{ slog.Handler }

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	if v, ok := ctx.Value(traceKey{}).(string); ok {
		r.AddAttrs(slog.String("trace", v))
	}
	return h.Handler.Handle(ctx, r)
}

// logger is a JSON logger writing to the buffer returned, which logs the
// context's trace.
func logger() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(ctxHandler{slog.NewJSONHandler(&buf, nil)}), &buf
}

// traced is a context with trace "T1".
var traced = context.WithValue(context.Background(), traceKey{}, "T1")

// checkOneLine fails t unless out is one log line holding each of want.
func checkOneLine(t *testing.T, out string, want ...string) {
	t.Helper()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want one log line, got %q", out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("log line %s lacks %s", out, w)
		}
	}
}

// spare is attrs in a slice with room for more, whose spare room Log and
// Guard must leave alone: callers share one slice between goroutines.
func spare() []any {
	attrs := make([]any, 1, 4)
	attrs[0] = slog.String("feed", "f1")
	return attrs
}

// checkUntouched fails t if the spare room of attrs was written.
func checkUntouched(t *testing.T, attrs []any) {
	t.Helper()
	for _, a := range attrs[1:cap(attrs)] {
		if a != nil {
			t.Fatalf("the caller's attrs slice was written past its length: %v", attrs[:cap(attrs)])
		}
	}
}

// Guarantee: a panic under a deferred Log is recovered and logged as one
// error line, with the context given, the attributes, the panic value and
// the stack, leaving the caller's attrs slice as it was; without a panic
// nothing is logged.
func TestLogRecoversAndLogsOnce(t *testing.T) {
	log, buf := logger()
	attrs := spare()
	func() {
		defer panics.Log(traced, log, "hook panicked", attrs...)
		panic("boom")
	}()
	checkOneLine(t, buf.String(), `"level":"ERROR"`, `"msg":"hook panicked"`, `"feed":"f1"`, `"panic":"boom"`, `"stack":"goroutine`, `"trace":"T1"`)
	checkUntouched(t, attrs)
	buf.Reset()
	func() {
		defer panics.Log(context.Background(), log, "hook panicked")
	}()
	if buf.Len() != 0 {
		t.Fatalf("logged without a panic: %q", buf.String())
	}
}

// Guarantee: a function wrapped by Guard is called with its arguments, and
// its panic is recovered and logged once as Log does (error level, the
// context, the message, the attributes, the panic value, the stack), leaving
// the caller's attrs slice as it was; the wrapper returns normally. Guard of
// nil is nil.
func TestGuardRecoversThePanicOfTheWrappedFunction(t *testing.T) {
	log, buf := logger()
	attrs := spare()
	var got int
	var gotCtx context.Context
	f := panics.Guard(func(ctx context.Context, n int) {
		got, gotCtx = n, ctx
		panic("boom")
	}, log, "hook panicked", attrs...)
	f(traced, 7)
	if got != 7 || gotCtx != traced {
		t.Fatalf("wrapped function got %d and context %v, want 7 and the caller's", got, gotCtx)
	}
	checkOneLine(t, buf.String(), `"level":"ERROR"`, `"msg":"hook panicked"`, `"feed":"f1"`, `"panic":"boom"`, `"stack":"goroutine`, `"trace":"T1"`)
	checkUntouched(t, attrs)
	if panics.Guard[int](nil, log, "hook panicked") != nil {
		t.Fatal("Guard(nil) is not nil")
	}
}
