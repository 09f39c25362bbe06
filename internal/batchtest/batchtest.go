// Package batchtest is a batcher whose batches a test looks at as they
// are emitted, to check when a batcher emits them (at BatchTimeout, or
// at once). Only tests import it.
package batchtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
)

// Probe collects the values of the batches a batcher emits, one slice per
// batch, in the order they were handled.
type Probe[T comparable] struct {
	batches chan []T
}

// New returns a probe that keeps up to 64 batches not yet looked at.
func New[T comparable]() *Probe[T] {
	return &Probe[T]{batches: make(chan []T, 64)}
}

// Batcher returns the options of the default batcher, one partition,
// whose batches of at most size open for at most timeout, and each is
// handed to the probe.
func (p *Probe[T]) Batcher(size int, timeout time.Duration) batcher.Options[T] {
	return batcher.Options[T]{Name: message.DefaultBatcher, BatchSize: size, BatchTimeout: timeout, Concurrency: 1,
		Handle: func(_ context.Context, batch []*message.Message[T], _ message.BatchInfo) error {
			vs := make([]T, len(batch))
			for i, m := range batch {
				vs[i] = m.Data
			}
			p.batches <- vs
			return nil
		}}
}

// None fails t when a batch was emitted and not looked at yet; what
// says why none should have been.
func (p *Probe[T]) None(t testing.TB, what string) {
	t.Helper()
	select {
	case vs := <-p.batches:
		t.Fatalf("batch %v emitted %s", vs, what)
	default:
	}
}

// Emitted fails t unless the batch emitted next, already, holds want;
// what says what should have emitted it.
func (p *Probe[T]) Emitted(t testing.TB, what string, want ...T) {
	t.Helper()
	select {
	case vs := <-p.batches:
		if !slices.Equal(vs, want) {
			t.Fatalf("batch %v, want %v", vs, want)
		}
	default:
		t.Fatalf("%s did not have the open batch emitted", what)
	}
}
