package source_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// subscribePanicked is what the source logs a panicking Subscribe with.
const subscribePanicked = "topic subscribe panicked; the subscribe fails"

// expectPanicError fails t unless err wraps the *message.PanicError of
// the held backend's Subscribe.
func expectPanicError(t *testing.T, what string, err error) {
	t.Helper()
	var pe *message.PanicError
	if !errors.As(err, &pe) || pe.Value != "held backend: subscribe broke" {
		t.Fatalf("%s = %v, want an error wrapping the *message.PanicError of the backend's Subscribe", what, err)
	}
}

// expectOneLine fails t unless the log holds exactly one line of the
// panic, at error level, naming the topic and carrying the stack.
func expectOneLine(t *testing.T, log *logtest.Lines) {
	t.Helper()
	lines := log.Matching(subscribePanicked)
	if len(lines) != 1 {
		t.Fatalf("%d log lines of the panic, want one: %q", len(lines), lines)
	}
	for _, want := range []string{"level=ERROR", "topic=held", `"panic: held backend: subscribe broke"`, "stack="} {
		if !strings.Contains(lines[0], want) {
			t.Fatalf("log line %q does not contain %q", lines[0], want)
		}
	}
}

// Guarantee: a topic backend whose Subscribe panics does not crash the
// process from the goroutine the source subscribes on: New's subscribe
// fails with an error wrapping the *message.PanicError, logged once on
// the source's Logger, and a later New on the same topic subscribes.
func TestPanickingSubscribeFailsNew(t *testing.T) {
	b := &heldBackend{panics: 1}
	h, err := topic.NewTopic[int]("held", topic.Options{}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	var log logtest.Lines
	opts := source.Options[int]{Topic: h, Mode: topic.Balanced("g"), Logger: slog.New(slog.NewTextHandler(&log, nil))}
	if src, err := source.New(opts); src != nil || err == nil {
		t.Fatalf("New with a panicking Subscribe = %v, %v; want no source and an error", src, err)
	} else {
		expectPanicError(t, "New", err)
	}
	expectOneLine(t, &log)
	b.releaseAll()
	src, err := source.New(opts)
	if err != nil {
		t.Fatalf("New once Subscribe no longer panics = %v", err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// runErrors is a source that reports each error its Run returns.
type runErrors struct {
	*source.Source[int]
	errs chan error
}

func (r *runErrors) Run(ctx context.Context, st *producer.Stage[int]) error {
	err := r.Source.Run(ctx, st)
	if err != nil {
		r.errs <- err
	}
	return err
}

// Guarantee: a panic in the Subscribe that replaces a broadcast
// subscription the topic disconnected for lagging is that stage's failed
// subscribe: its Run returns an error wrapping the *message.PanicError,
// logged once on the source's Logger, the pipeline runs the stage again,
// and its next subscribe replaces the subscription, whose messages are
// handled.
func TestPanickingResubscribeFailsTheStagesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, h := heldTopic(t, topic.Options{Mode: topic.BroadcastOnly,
			Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect}})
		var log logtest.Lines
		src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Broadcast(), Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		r := &runErrors{Source: src, errs: make(chan error, 4)}
		handled := runHandling(t, r)
		t.Cleanup(b.releaseAll)
		b.mu.Lock()
		b.panics = 1
		b.mu.Unlock()
		b.sub(t, 0).disconnect()
		expectPanicError(t, "Run whose resubscribe panicked", <-r.errs)
		expectOneLine(t, &log)
		wait.For(t, "the stage's next Run to replace the subscription", func() bool { return src.Stats().Resubscribes == 1 })
		b.sub(t, 1).in <- topic.Envelope[int]{ID: 2, Value: 2}
		if v := <-handled; v != 2 {
			t.Fatalf("handled %d, want the new subscription's 2", v)
		}
		if n := len(r.errs); n != 0 {
			t.Fatalf("%d more failed Runs, want none", n)
		}
	})
}

// Guarantee: a topic backend whose Receive panics or ends the goroutine
// (runtime.Goexit) fails that stage's Run, which the pipeline runs again,
// and leaves the slot to the next Run: it replaces the subscription whose
// Receive broke and receives through the new one, rather than waiting for
// ever for the turn to receive.
func TestABrokenReceiveLeavesTheSlotToTheNextRun(t *testing.T) {
	crashes := map[string]func(){
		"panic":  func() { panic("held backend: receive broke") },
		"Goexit": runtime.Goexit,
	}
	modes := map[string]topic.SubscriptionMode{"balanced": topic.Balanced("g"), "broadcast": topic.Broadcast()}
	for how, crash := range crashes {
		for name, mode := range modes {
			t.Run(how+"/"+name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b, h := heldTopic(t, topic.Options{})
					src := newSource(t, h, mode)
					handled := runHandling(t, src)
					t.Cleanup(b.releaseAll)
					b.sub(t, 0).crash <- crash
					wait.For(t, "the stage's next Run to replace the subscription whose Receive broke", func() bool {
						b.mu.Lock()
						defer b.mu.Unlock()
						return len(b.subs) == 2
					})
					b.sub(t, 1).in <- topic.Envelope[int]{ID: 2, Value: 2}
					if v := <-handled; v != 2 {
						t.Fatalf("handled %d, want the new subscription's 2", v)
					}
				})
			})
		}
	}
}

// Guarantee: a topic backend whose Subscribe ends the goroutine
// (runtime.Goexit, as t.FailNow does) fails that subscribe at once with an
// error wrapping message.ErrHandlerExited, as a panic does, instead of
// leaving New waiting for ever (and NewContext until its context ends) on
// a subscribe that never ends; a later New on the same topic subscribes.
func TestASubscribeThatEndsTheGoroutineFailsNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, h := heldTopic(t, topic.Options{})
		b.exits = 1
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		var log logtest.Lines
		opts := source.Options[int]{Topic: h, Mode: topic.Balanced("g"), Logger: slog.New(slog.NewTextHandler(&log, nil))}
		began := time.Now()
		src, err := source.NewContext(ctx, opts)
		if src != nil || !errors.Is(err, message.ErrHandlerExited) {
			t.Fatalf("NewContext with a Subscribe that ends its goroutine = %v, %v; want no source and an error wrapping message.ErrHandlerExited", src, err)
		}
		if d := time.Since(began); d != 0 {
			t.Fatalf("NewContext failed after %v, want at once", d)
		}
		if lines := log.Matching("topic subscribe ended its goroutine (runtime.Goexit); the subscribe fails"); len(lines) != 1 ||
			!strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "Goexit") {
			t.Fatalf("log lines of the exit %q, want one at error level with the stack of the exit", lines)
		}
		b.releaseAll()
		src, err = source.New(opts)
		if err != nil {
			t.Fatalf("New once Subscribe no longer exits = %v", err)
		}
		if err := src.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: a topic backend whose subscription Close panics does not
// crash the process from the goroutine the source closes it on: the
// panic is logged once, at error level, with the stack, and the source's
// Close returns.
func TestAPanickingSubscriptionCloseIsLoggedAndCloseReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, h := heldTopic(t, topic.Options{})
		b.closePanics = true
		b.releaseAll()
		var log logtest.Lines
		src, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g"), Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Close(t.Context()); err != nil {
			t.Fatalf("Close = %v, want nil", err)
		}
		lines := log.Matching("topic subscription Close panicked")
		if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "held backend: close broke") ||
			!strings.Contains(lines[0], "stack=") {
			t.Fatalf("log lines of the panic %q, want one at error level with the panic and the stack", lines)
		}
	})
}
