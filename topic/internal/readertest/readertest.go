// Package readertest runs a pipeline that reads through a source (a
// topic's, or a topology's) and records what it handles, and reads a
// topic's Stats while its subscribers come and go, for the tests of the
// topic and topology backends.
package readertest

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// stopWithin bounds the stop of a Reader's pipeline at the test's end.
const stopWithin = 30 * time.Second

// Reader is a running pipeline of one producer stage reading through a
// source, whose processors record the id of each value handled.
type Reader[T any] struct {
	p *pipeline.Pipeline[T, T]

	mu      sync.Mutex
	handled map[int]bool
}

// Start starts a Reader named name on h, subscribed in mode through a
// topic source, logging to log; it is stopped (draining) when the test
// ends. A value is its own id.
func Start(t testing.TB, name string, h *topic.Handle[int], mode topic.SubscriptionMode, log *slog.Logger) *Reader[int] {
	t.Helper()
	src, err := source.New(source.Options[int]{Topic: h, Mode: mode, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return Run(t, name, src, func(v int) int { return v }, log)
}

// Run starts a Reader named name reading through src, logging to log,
// which records id(v) for each value v handled; it is stopped (draining)
// when the test ends.
func Run[T any](t testing.TB, name string, src producer.Source[T], id func(T) int, log *slog.Logger) *Reader[T] {
	t.Helper()
	r := &Reader[T]{handled: map[int]bool{}}
	var err error
	r.p, err = pipeline.New(pipeline.Options[T, T]{
		Name:     name,
		Logger:   log,
		Producer: producer.Options[T]{Source: src},
		Processors: processor.Options[T, T]{Handle: func(_ context.Context, m *message.Message[T]) (T, error) {
			r.mu.Lock()
			r.handled[id(m.Data)] = true
			r.mu.Unlock()
			return m.Data, nil
		}},
	})
	if err != nil {
		_ = src.Close(context.Background())
		t.Fatal(err)
	}
	if err := r.p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopWithin)
		defer cancel()
		if err := r.p.Stop(ctx); err != nil {
			t.Errorf("stopping the pipeline: %v", err)
		}
	})
	return r
}

// Status is the status of the pipeline's producer stage.
func (r *Reader[T]) Status() producer.StageStatus { return r.p.SourceStatus()[0] }

// Handled is how many distinct values the pipeline handled.
func (r *Reader[T]) Handled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handled)
}

// String describes the stage's status and the count of values handled,
// for the failure message of a wait.
func (r *Reader[T]) String() string {
	return fmt.Sprintf("%+v (%d handled)", r.Status(), r.Handled())
}

// Modes are the subscription modes a Reader is tested in, by name: a
// balanced member of group "g", and a broadcast subscriber.
func Modes() map[string]topic.SubscriptionMode {
	return map[string]topic.SubscriptionMode{"balanced": topic.Balanced("g"), "broadcast": topic.Broadcast()}
}

// MisbehavingReach is a subscriber's Reach observer that panics when told
// of a degrade and ends its goroutine (runtime.Goexit, as t.FailNow does)
// when told of a recovery, after counting each.
type MisbehavingReach struct{ Degrades, Recoveries atomic.Int32 }

// Degrade counts the call and panics.
func (r *MisbehavingReach) Degrade(error) {
	r.Degrades.Add(1)
	panic("reach observer broke")
}

// Recovered counts the call and ends the goroutine.
func (r *MisbehavingReach) Recovered() {
	r.Recoveries.Add(1)
	runtime.Goexit()
}
