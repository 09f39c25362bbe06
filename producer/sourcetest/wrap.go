package sourcetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/producer"
)

// forward is the base of the suite's wrappers: it embeds the wrapped
// source, so that a wrapper passes on every part of the source contract it
// does not change itself.
type forward[T any] struct{ producer.Source[T] }

// ErrInjected is the error a source wrapped by Failing returns from Run
// when Fail ends that run.
var ErrInjected = errors.New("sourcetest: injected source failure")

// Failing wraps sources so that their runs in progress can be made to fail,
// for harnesses whose broker offers no fault that makes the source's own
// Run return an error. Fail cancels the context of every run in progress,
// waits until the source's Run has returned, and has the wrapper return
// ErrInjected: the producer stage sees a failed run and restarts the source,
// whose acknowledgers must keep working for the messages the failed run
// delivered. Use one Failing per fixture and wrap every source with Wrap.
//
// A cancelled context tells a source that the pipeline is stopping, so this
// fault only suits sources that leave nothing behind when Run returns on
// one. A source that keeps resources open for the drain until Close (the
// Pulsar source keeps its consumers, and with them the messages they
// prefetched) needs a fault of its own broker instead: a consumer closed
// under it, a refused subscription.
type Failing[T any] struct {
	mu   sync.Mutex
	runs map[*failRun]struct{}
}

type failRun struct {
	cancel context.CancelFunc
	failed bool
	done   chan struct{}
}

// Wrap returns src wrapped so that Fail reaches its runs.
func (f *Failing[T]) Wrap(src producer.Source[T]) producer.Source[T] {
	return &failingSource[T]{forward: forward[T]{Source: src}, f: f}
}

// Fail ends every run in progress with ErrInjected and returns once their
// Run calls have returned, or with ctx.Err(). It returns an error when no
// run is in progress.
func (f *Failing[T]) Fail(ctx context.Context) error {
	f.mu.Lock()
	var done []chan struct{}
	for r := range f.runs {
		r.failed = true
		r.cancel()
		done = append(done, r.done)
	}
	f.mu.Unlock()
	if len(done) == 0 {
		return errors.New("sourcetest: Fail with no run in progress")
	}
	for _, d := range done {
		select {
		case <-d:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type failingSource[T any] struct {
	forward[T]
	f *Failing[T]
}

func (s *failingSource[T]) Run(ctx context.Context, st *producer.Stage[T]) error {
	runCtx, cancel := context.WithCancel(ctx)
	r := &failRun{cancel: cancel, done: make(chan struct{})}
	s.f.mu.Lock()
	if s.f.runs == nil {
		s.f.runs = map[*failRun]struct{}{}
	}
	s.f.runs[r] = struct{}{}
	s.f.mu.Unlock()
	err := s.Source.Run(runCtx, st)
	cancel()
	s.f.mu.Lock()
	delete(s.f.runs, r)
	failed := r.failed
	s.f.mu.Unlock()
	close(r.done)
	if failed && ctx.Err() == nil {
		return errors.Join(ErrInjected, err)
	}
	return err
}

// observed is the suite's own wrapper around the source under test: it
// records the runs and the Close call, and keeps the stages so that the
// suite can read their buffers.
type observed[T any] struct {
	forward[T]

	mu            sync.Mutex
	stages        []*producer.Stage[T]
	active        int       // Run calls in progress
	runs          int       // Run calls started
	lastRunAt     time.Time // when the last Run call returned
	closes        int
	closeAt       time.Time
	activeAtClose int
}

func observe[T any](src producer.Source[T]) *observed[T] {
	return &observed[T]{forward: forward[T]{Source: src}}
}

func (o *observed[T]) Run(ctx context.Context, st *producer.Stage[T]) error {
	o.mu.Lock()
	o.active++
	o.runs++
	if !containsStage(o.stages, st) {
		o.stages = append(o.stages, st)
	}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.active--
		o.lastRunAt = time.Now()
		o.mu.Unlock()
	}()
	return o.Source.Run(ctx, st)
}

func (o *observed[T]) Close(ctx context.Context) error {
	o.mu.Lock()
	o.closes++
	o.closeAt = time.Now()
	o.activeAtClose = o.active
	o.mu.Unlock()
	return o.Source.Close(ctx)
}

func containsStage[T any](ss []*producer.Stage[T], st *producer.Stage[T]) bool {
	for _, s := range ss {
		if s == st {
			return true
		}
	}
	return false
}

// buffered is how many delivered messages wait in the stage buffers.
func (o *observed[T]) buffered() int {
	o.mu.Lock()
	ss := o.stages
	o.mu.Unlock()
	n := 0
	for _, s := range ss {
		n += s.Buffered()
	}
	return n
}

// state returns the run counters.
func (o *observed[T]) state() (active, runs, closes int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.active, o.runs, o.closes
}
