package message_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a message that failed with its context's error while that
// context is done is interrupted: its error wraps both acker.ErrShutdown and
// the handler's error, and its outcome asks for a retry.
func TestMarkInterruptedWrapsAndRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := message.New(1, nil, 7)
	m.Fail(fmt.Errorf("query: %w", ctx.Err()))
	if !m.MarkInterrupted(ctx) || !m.Interrupted() {
		t.Fatal("a failure with a cancelled handler context is not marked interrupted")
	}
	o := m.Outcome()
	if !errors.Is(o.Err, acker.ErrShutdown) || !errors.Is(o.Err, context.Canceled) || !acker.Interrupted(o) {
		t.Fatalf("outcome error %v, want it to wrap ErrShutdown and context.Canceled", o.Err)
	}
	if o.Disposition != acker.DispositionRetry {
		t.Fatalf("outcome disposition %v, want retry", o.Disposition)
	}
	var se *acker.ShutdownError
	if !errors.As(o.Err, &se) {
		t.Fatalf("outcome error %T, want a *acker.ShutdownError", o.Err)
	}
}

// Guarantee: a failure hook can neither turn an interrupted message into a
// discard nor strip the shutdown from its error.
func TestInterruptedSurvivesHook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	m := message.New(1, nil, 1)
	m.Fail(ctx.Err())
	m.MarkInterrupted(ctx)
	// What a hook might do:
	m.SetDisposition(acker.DispositionDiscard)
	m.Fail(errors.New("replaced by the hook"))
	o := m.Outcome()
	if o.Disposition != acker.DispositionRetry || m.Disposition() != acker.DispositionRetry {
		t.Fatalf("disposition after the hook %v (outcome %v), want retry", m.Disposition(), o.Disposition)
	}
	if !acker.Interrupted(o) {
		t.Fatalf("error after the hook %v, want it to wrap ErrShutdown", o.Err)
	}
}

// Guarantee: a handler's own context error while the pipeline's context is
// live, and any other failure while it is done, stay ordinary failures.
func TestNotInterrupted(t *testing.T) {
	own, cancelOwn := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelOwn()
	<-own.Done()
	live := context.Background()
	m := message.New(1, nil, 1)
	m.Fail(own.Err())
	if m.MarkInterrupted(live) || m.Interrupted() {
		t.Fatal("a handler's own deadline with a live pipeline context was marked interrupted")
	}
	m.SetDisposition(acker.DispositionDiscard)
	if o := m.Outcome(); o.Disposition != acker.DispositionDiscard || errors.Is(o.Err, acker.ErrShutdown) {
		t.Fatalf("outcome %+v, want an ordinary discard", o)
	}

	done, cancel := context.WithCancel(context.Background())
	cancel()
	n := message.New(2, nil, 2)
	n.Fail(errors.New("bad record"))
	if n.MarkInterrupted(done) {
		t.Fatal("a failure unrelated to the context was marked interrupted")
	}
	ok := message.New(3, nil, 3)
	if ok.MarkInterrupted(done) {
		t.Fatal("a message that did not fail was marked interrupted")
	}
}

// Guarantee: Reuse clears the interruption, as Init would.
func TestReuseClearsInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := message.New(1, nil, 1)
	m.Fail(ctx.Err())
	m.MarkInterrupted(ctx)
	m.Reuse(2, 2)
	m.Fail(errors.New("later failure"))
	m.SetDisposition(acker.DispositionDiscard)
	if m.Interrupted() || m.Outcome().Disposition != acker.DispositionDiscard {
		t.Fatalf("reused message still interrupted: %v", m.Outcome())
	}
}

// Guarantee: String quotes and escapes what user code set (batcher, key,
// error), so a message in a log line cannot forge another line.
func TestStringEscapesUserStrings(t *testing.T) {
	m := message.New(1, nil, 1)
	m.SetBatcher("b\nlevel=ERROR")
	m.SetBatchKey("k\x1b[31m")
	m.Fail(errors.New("e\r\n"))
	s := m.String()
	if strings.ContainsAny(s, "\n\r\x1b") {
		t.Fatalf("String() = %q holds raw control characters", s)
	}
}
