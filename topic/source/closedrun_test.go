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

// Guarantee: Run after Close returns ErrClosed: a pipeline reading a
// closed source gives up on it with a *producer.RestartError matching
// ErrClosed.
func TestRunAfterCloseReturnsErrClosed(t *testing.T) {
	h := newTopic(t, "t", topic.Options{Mode: topic.Mixed})
	src := newSource(t, h, topic.Balanced("g"))
	if err := src.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name: "closed",
		Producer: producer.Options[int]{Source: src, Restart: producer.Restart{
			MaxRestarts: 1, Window: time.Hour, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
		}},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(t.Context())
	var re *producer.RestartError
	if !errors.As(err, &re) || !errors.Is(err, source.ErrClosed) {
		t.Fatalf("Run of a pipeline reading a closed source = %v, want a *producer.RestartError matching source.ErrClosed", err)
	}
}
