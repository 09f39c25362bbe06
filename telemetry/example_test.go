package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/telemetry"
)

// Hooks of a user's own, counting what the handlers did and the batches
// the batch handler was given. Hooks run on the stages' goroutines, many
// at once, so they count with atomics and keep nothing the event points
// to.
func ExampleHooks() {
	var handled, failed, batches, batched atomic.Int64
	hooks := &telemetry.Hooks{
		MessageStop: func(_ context.Context, e telemetry.Message) {
			if e.Err != nil {
				failed.Add(1)
				return
			}
			handled.Add(1)
		},
		BatchStop: func(_ context.Context, e telemetry.Batch) {
			batches.Add(1)
			batched.Add(int64(e.Info.Size - e.Failed))
		},
	}

	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:      "counted",
		Telemetry: hooks,
		Processors: processor.Options[int, int]{
			Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data < 0 {
					return 0, errors.New("negative")
				}
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[int]{{
			Name:         message.DefaultBatcher,
			BatchSize:    10,
			BatchTimeout: time.Hour,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error {
				return nil
			},
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// Test sends each message in flush mode: one batch each.
	if _, err := p.Test(ctx, 1, -2, 3, 4); err != nil {
		fmt.Println(err)
	}
	if err := p.Stop(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("handled %d, failed %d; %d batches of %d messages\n",
		handled.Load(), failed.Load(), batches.Load(), batched.Load())
	// Output:
	// handled 3, failed 1; 3 batches of 3 messages
}
