package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a run Fail ends returns an error that matches ErrInjected
// and the source's own error both, so the pipeline that gives up on the
// source reports a *producer.RestartError matching them.
func TestARunFailEndsMatchesErrInjectedAndTheSourcesError(t *testing.T) {
	started := make(chan struct{}, 1)
	src := producer.SourceFunc[string](func(ctx context.Context, _ *producer.Stage[string]) error {
		started <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("reading: %w", ctx.Err())
	})
	fail := &Failing[string]{}
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name: "failing",
		Producer: producer.Options[string]{Source: fail.Wrap(src), Restart: producer.Restart{
			MaxRestarts: 1, Window: time.Hour, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
		}},
		Processors: processor.Options[string, string]{Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(t.Context()) }()
	for range 2 {
		<-started
		if err := fail.Fail(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	err = <-ran
	var re *producer.RestartError
	if !errors.As(err, &re) || !errors.Is(err, ErrInjected) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want a *producer.RestartError matching ErrInjected and the source's context.Canceled", err)
	}
}
