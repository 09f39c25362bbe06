package pipeline_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// busySource is a source whose exported state changes while it is in use,
// as a source shared with a running pipeline does.
type busySource struct {
	producer.Basic
	Delivered atomic.Int64
	Lag       int64 // written atomically by its owner
}

func (*busySource) Run(context.Context, *producer.Stage[int]) error { return nil }

// Guarantee: creating a pipeline never reads inside its source: validating
// the options leaves a source that is in use elsewhere alone (under -race,
// a read of its fields would race with their owner's writes).
func TestNewDoesNotReadInsideTheSource(t *testing.T) {
	src := &busySource{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				src.Delivered.Add(1)
				atomic.AddInt64(&src.Lag, 1)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for range 20 {
		if _, err := pipeline.New(pipeline.Options[int, int]{
			Name:       "shared-source",
			Producer:   producer.Options[int]{Source: src},
			Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }},
		}); err != nil {
			t.Fatalf("New: %v", err)
		}
	}
}
