// Package wraprun hands a source's Run a real producer stage, for tests: it
// runs a pipeline of its own whose source calls Run with its stage, as a
// source wrapping another does, and returns what Run returned.
package wraprun

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Run starts a pipeline whose source calls run once with its first
// stage, waits for run to return, stops the pipeline and returns run's
// error, or an error saying it panicked. It fails t when run has not returned within 10 seconds, or when
// the pipeline cannot be built, started or stopped.
func Run[T any](t testing.TB, run func(context.Context, *producer.Stage[T]) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ran := make(chan error, 1)
	p, err := pipeline.New(pipeline.Options[T, T]{
		Name: "wraprun",
		Producer: producer.Options[T]{Source: producer.SourceFunc[T](func(ctx context.Context, st *producer.Stage[T]) error {
			select {
			case ran <- recovered(ctx, st, run):
			default: // run once
			}
			<-ctx.Done()
			return nil
		})},
		Processors: processor.Options[T, T]{Handle: func(_ context.Context, m *message.Message[T]) (T, error) { return m.Data, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stopping the pipeline: %v", err)
		}
	}()
	select {
	case err := <-ran:
		return err
	case <-ctx.Done():
		t.Fatal("Run did not return")
		return nil
	}
}

// recovered calls run, returning its panic as an error.
func recovered[T any](ctx context.Context, st *producer.Stage[T], run func(context.Context, *producer.Stage[T]) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Run panicked: %v", r)
		}
	}()
	return run(ctx, st)
}
