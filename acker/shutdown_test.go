package acker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
)

// Guarantee: only an outcome whose error wraps ErrShutdown is interrupted;
// a successful outcome and one failed for any other reason are not.
func TestOnlyAShutdownFailureIsInterrupted(t *testing.T) {
	for name, tc := range map[string]struct {
		o    acker.Outcome
		want bool
	}{
		"successful":         {acker.Outcome{ID: 1}, false},
		"failed":             {acker.Outcome{ID: 2, Err: errors.New("store down")}, false},
		"cancelled":          {acker.Outcome{ID: 3, Err: context.Canceled}, false},
		"shutdown":           {acker.Outcome{ID: 4, Err: acker.WrapShutdown(context.Canceled)}, true},
		"shutdown, deadline": {acker.Outcome{ID: 5, Err: acker.WrapShutdown(context.DeadlineExceeded)}, true},
	} {
		if got := acker.Interrupted(tc.o); got != tc.want {
			t.Errorf("%s: Interrupted(%+v) = %v, want %v", name, tc.o, got, tc.want)
		}
	}
}

// Guarantee: a failure is caused by the shutdown only when the context the
// stage gave the handler is done and the handler's error is (or wraps) a
// cancellation or a passed deadline; a handler's own deadline passing while
// the pipeline runs is an ordinary failure.
func TestCausedByShutdownNeedsTheStagesContextDoneAndAContextError(t *testing.T) {
	running := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	own := errors.Join(errors.New("query"), context.DeadlineExceeded)
	for name, tc := range map[string]struct {
		ctx  context.Context
		err  error
		want bool
	}{
		"stopped, cancelled":             {stopped, context.Canceled, true},
		"stopped, deadline passed":       {stopped, context.DeadlineExceeded, true},
		"stopped, wrapped deadline":      {stopped, own, true},
		"stopped, other error":           {stopped, errors.New("store down"), false},
		"stopped, no error":              {stopped, nil, false},
		"running, handler's own timeout": {running, own, false},
		"running, cancelled":             {running, context.Canceled, false},
	} {
		if got := acker.CausedByShutdown(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: CausedByShutdown = %v, want %v", name, got, tc.want)
		}
	}
}

// Guarantee: a ShutdownError's message names the shutdown and the
// handler's error.
func TestAShutdownErrorNamesTheShutdownAndTheHandlersError(t *testing.T) {
	msg := acker.WrapShutdown(errors.New("query: context canceled")).Error()
	if !strings.Contains(msg, acker.ErrShutdown.Error()) || !strings.Contains(msg, "query: context canceled") {
		t.Fatalf("error %q, want it to name the shutdown (%q) and the handler's error", msg, acker.ErrShutdown)
	}
}
