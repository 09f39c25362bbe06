package producer_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/boulevard-go/boulevard/acker"
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

	// At most 3 fetched ahead. The source is exhausted: the pipeline drains
	// and Run returns.
	runUntilExhausted("shop", src, producer.Flow{Initial: 3, Threshold: 1, Refill: 2},
		func(_ context.Context, m *message.Message[string]) (string, error) {
			fmt.Println("processing", m.Data)
			return m.Data, nil
		})

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

// A source whose client fetches on demand (a queue's receive, a poll)
// registers its feed without a grant callback and takes permits with
// Acquire before each fetch, asking for no more than it still has to fetch:
// it then delivers one message for every permit it took, never more. Each
// message carries the acknowledger its outcome goes back to, here a
// Recorder standing for the broker's acks.
func ExampleFeed_Acquire() {
	queue := []string{"job-1", "job-2", "job-3", "job-4", "job-5", "job-6", "job-7"}
	acks := acker.NewRecorder(false)

	var feed *producer.Feed[string]
	acquired := 0
	src := producer.SourceFunc[string](func(ctx context.Context, stage *producer.Stage[string]) error {
		feed = stage.NewFeed("jobs", nil) // pull model: no grant callback
		for next := 0; next < len(queue); {
			n, err := feed.Acquire(ctx, len(queue)-next) // waits for permits
			if err != nil {
				return err // ctx cancelled or feed closed
			}
			acquired += n
			fetched := make([]*message.Message[string], 0, n) // the fetch: n jobs
			for _, j := range queue[next : next+n] {
				fetched = append(fetched, message.New(j, acks, uint64(next)))
				next++
			}
			feed.Deliver(fetched...)
		}
		return nil // exhausted
	})

	// At most 2 fetched ahead.
	runUntilExhausted("jobs", src, producer.Flow{Initial: 2, Threshold: 1, Refill: 2},
		func(_ context.Context, m *message.Message[string]) (string, error) {
			return m.Data, nil
		})

	st := feed.Stats()
	fmt.Printf("acquired %d, delivered %d, overdelivered %d\n", acquired, st.Delivered, st.Overdelivered)
	fmt.Printf("acked %d, failed %d\n", acks.Total()-acks.FailedCount(), acks.FailedCount())
	// Output:
	// acquired 7, delivered 7, overdelivered 0
	// acked 7, failed 0
}

// runUntilExhausted runs a pipeline of one processor on src until the
// source is exhausted and the pipeline has drained.
func runUntilExhausted(name string, src producer.Source[string], flow producer.Flow, handle processor.Handler[string, string]) {
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name:       name,
		Producer:   producer.Options[string]{Source: src, Flow: flow},
		Processors: processor.Options[string, string]{Concurrency: 1, Handle: handle},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println("stopped:", err)
	}
}
