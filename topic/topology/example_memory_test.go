package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// A topology in memory feeding a pipeline: a retried order waits in the
// hold queue and is delivered again, one retried more often than
// SourceOptions.MaxRetries allows goes to the DLQ after its hold, as does
// a rejected one at once, and Replay puts them back on the main topic once
// their cause is fixed.
func ExampleNewMemory() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	top, err := topology.New("orders").Hold(time.Second).DLQ().Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	mem, err := topology.NewMemory[string](topology.MemoryOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close(ctx)
	q, err := mem.Declare(ctx, top) // idempotent: run it on every start
	if err != nil {
		fmt.Println(err)
		return
	}

	// One retry each: the second Retry of a message dead-letters it.
	src, err := topology.NewSource(topology.SourceOptions[string]{Queues: q, MaxRetries: 1, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	var back sync.WaitGroup // order-2 and order-4, back from the hold queue
	back.Add(2)
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name:     "orders",
		Logger:   quiet,
		Producer: producer.Options[string]{Source: src},
		Processors: processor.Options[string, string]{
			Concurrency: 1, // one processor: the lines below come in order
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				d, _ := topology.DeliveryOf(m)
				switch {
				case m.Data == "order-2" && d.Retries == 0:
					fmt.Println("order-2: gateway down, retried")
					return "", topology.Retry(errors.New("gateway down"))
				case m.Data == "order-3":
					fmt.Println("order-3: rejected")
					return "", topology.Reject(errors.New("malformed amount"))
				case m.Data == "order-4":
					fmt.Printf("order-4: card declined, retried (retry %d)\n", d.Retries+1)
					if d.Retries > 0 {
						back.Done()
					}
					return "", topology.Retry(errors.New("card declined"))
				}
				fmt.Printf("%s: settled after %d retries\n", m.Data, d.Retries)
				if m.Data == "order-2" {
					back.Done()
				}
				return m.Data, nil
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[string]{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range []string{"order-1", "order-2", "order-3", "order-4"} {
		if err := pub.Publish(ctx, o); err != nil {
			fmt.Println(err)
		}
	}
	back.Wait() // a second later
	// Stop drains: every outcome, the dead-lettering of order-3 and
	// order-4 included, is carried out before it returns.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Stop(stopCtx); err != nil {
		fmt.Println(err)
	}
	dlq, _ := top.DLQ()
	fmt.Println("letters in", dlq+":", mem.Queued(dlq, ""))

	rep, err := topology.Replay(ctx, q, topology.ReplayOptions[string]{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range rep.Replayed {
		fmt.Printf("replayed %s (%s: %s)\n", l.Value, l.Death.Reason, l.Death.Error)
	}
	fmt.Println("letters in", dlq+":", mem.Queued(dlq, ""))
	// Output:
	// order-1: settled after 0 retries
	// order-2: gateway down, retried
	// order-3: rejected
	// order-4: card declined, retried (retry 1)
	// order-2: settled after 1 retries
	// order-4: card declined, retried (retry 2)
	// letters in orders-dlq: 2
	// replayed order-3 (rejected: malformed amount)
	// replayed order-4 (max_retries: card declined)
	// letters in orders-dlq: 0
}
