package source_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// Guarantee: a Source New did not make (a zero value, declared with var)
// holds nothing: its Close returns nil, without crashing the program, and
// its Run, handed a pipeline's stage (a source wrapping it), returns an
// error wrapping topic.ErrNotCreated at once instead of panicking.
func TestAZeroSourceClosesAndRefusesToRunWithoutCrashing(t *testing.T) {
	var zero source.Source[int]
	if err := zero.Close(t.Context()); err != nil {
		t.Errorf("Close of a zero Source: %v, want nil", err)
	}
	ran := make(chan error, 1)
	run(t, pipeline.Options[int, int]{
		Name: "zero",
		Producer: producer.Options[int]{Source: producer.SourceFunc[int](func(ctx context.Context, st *producer.Stage[int]) error {
			select {
			case ran <- zero.Run(ctx, st):
			default:
			}
			<-ctx.Done()
			return nil
		})},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
	})
	select {
	case err := <-ran:
		if !errors.Is(err, topic.ErrNotCreated) {
			t.Errorf("Run of a zero Source: %v, want an error wrapping topic.ErrNotCreated", err)
		}
	case <-time.After(deadline):
		t.Fatal("the wrapping source's Run did not return")
	}
}
