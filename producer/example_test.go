package producer_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// A source registers one feed per flow-controlled consumer, fetches only as
// many messages as the feed has been granted, and delivers them. The stage
// grants Initial permits when the feed is registered and Refill more each
// time the feed's remaining permits fall to Threshold, as messages leave for
// the processors. Run returning nil means the source is exhausted.
func ExampleSourceFunc() {
	orders := []string{"order-1", "order-2", "order-3", "order-4", "order-5", "order-6", "order-7"}

	var feed *producer.Feed[string]
	src := producer.SourceFunc[string](func(ctx context.Context, stage *producer.Stage[string]) error {
		var (
			mu      sync.Mutex
			permits int
			wake    = make(chan struct{}, 1)
		)
		// The grant callback must not block: record the permits, wake the fetch loop.
		feed = stage.NewFeed("orders", func(n int) {
			mu.Lock()
			permits += n
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		for next := 0; next < len(orders); {
			mu.Lock()
			n := min(permits, len(orders)-next)
			permits -= n
			mu.Unlock()
			if n == 0 { // out of permits: wait for a refill
				select {
				case <-wake:
					continue
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			for _, o := range orders[next : next+n] {
				feed.Deliver(message.New(o, nil, 0))
			}
			next += n
		}
		return nil
	})

	p, err := pipeline.New(pipeline.Options[string, string]{
		Name: "shop",
		Producer: producer.Options[string]{
			Source: src,
			Flow:   producer.Flow{Initial: 3, Threshold: 1, Refill: 2}, // at most 3 fetched ahead
		},
		Processors: processor.Options[string, string]{
			Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				fmt.Println("processing", m.Data)
				return m.Data, nil
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The source is exhausted: the pipeline drains and Run returns.
	if err := p.Run(context.Background()); err != nil {
		fmt.Println("stopped:", err)
	}

	st := feed.Stats()
	fmt.Printf("delivered %d, dispatched %d\n", st.Delivered, st.Dispatched)
	// Output:
	// processing order-1
	// processing order-2
	// processing order-3
	// processing order-4
	// processing order-5
	// processing order-6
	// processing order-7
	// delivered 7, dispatched 7
}
