// Package stagetest runs a pipeline stage's Run on its own in tests, the way
// the pipeline does, and waits for it.
package stagetest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Runner is a stage: Run returns once every goroutine of the stage has.
type Runner interface{ Run(ctx context.Context) }

// runs maps a stage to the channel closed when its Run returns.
var runs sync.Map

// Go calls r.Run(ctx) in a new goroutine and returns a channel closed when
// it returns; Done(r) returns the same channel.
func Go(ctx context.Context, r Runner) <-chan struct{} {
	done := make(chan struct{})
	runs.Store(r, done)
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return done
}

// Done is the channel Go returned for r.
func Done(r Runner) <-chan struct{} {
	ch, _ := runs.Load(r)
	return ch.(chan struct{})
}

// WaitStopped waits up to patience for done, failing the test instead of
// hanging when a goroutine of the stage does not return after the hard
// stop.
func WaitStopped(t testing.TB, done <-chan struct{}, patience time.Duration) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(patience):
		t.Error("timed out waiting for every goroutine of the stage to return after the hard stop")
	}
}
