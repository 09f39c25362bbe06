package processor_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// Processors that price orders. Prepare sees a whole chunk first, for work
// that is cheaper in bulk (one lookup for the chunk's products, standing
// for one database query) and fails the messages it cannot serve; Handle
// then sees each message that has not failed; HandleFailed decides how the
// failed ones are acknowledged: an unknown product will never be priced,
// so its message is discarded rather than delivered again.
func ExampleOptions() {
	catalogue := map[string]int{"apple": 3, "pear": 5}
	lookup := func(products []string) map[string]int {
		found := make(map[string]int, len(products))
		for _, p := range products {
			if price, ok := catalogue[p]; ok {
				found[p] = price
			}
		}
		return found
	}

	p := start(pipeline.Options[string, int]{
		Name: "pricing",
		Processors: processor.Options[string, int]{
			Concurrency: 1,
			MaxDemand:   10,
			Prepare: func(_ context.Context, msgs []*message.Message[string]) error {
				products := make([]string, 0, len(msgs))
				for _, m := range msgs {
					products = append(products, strings.Fields(m.Data)[1])
				}
				prices := lookup(products)
				for i, m := range msgs {
					if _, ok := prices[products[i]]; !ok {
						m.Fail(fmt.Errorf("unknown product %q", products[i]))
						continue
					}
					m.Metadata = prices[products[i]]
				}
				return nil
			},
			Handle: func(_ context.Context, m *message.Message[string]) (int, error) {
				var qty int
				if _, err := fmt.Sscan(m.Data, &qty); err != nil {
					return 0, err
				}
				price, _ := message.MetadataAs[int](m)
				return qty * price, nil
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[string]) {
				for _, m := range failed {
					m.SetDisposition(acker.DispositionDiscard)
				}
			},
		},
	})
	if p == nil {
		return
	}
	ctx := context.Background()
	defer p.Stop(ctx)

	outcomes, err := p.Test(ctx, "4 apple", "2 kiwi", "3 pear")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range outcomes {
		if o.Err != nil {
			fmt.Printf("failed: %v (%s)\n", o.Err, o.Disposition)
			continue
		}
		fmt.Println("total", o.Data)
	}
	// Output:
	// total 12
	// failed: unknown product "kiwi" (discard)
	// total 15
}

// Concurrency processors handle messages in parallel; PartitionBy sends
// every message of one account to the same processor, which handles them
// in the order they arrived, while the other processors handle the other
// accounts. Each processor takes chunks of at most MaxDemand messages
// (what Prepare sees). A handler that returns an error fails its message
// alone: its outcome carries the error and the default disposition (the
// source's own choice, a redelivery for most), and the rest of its chunk
// succeeds.
func ExampleOptions_partitionBy() {
	var (
		mu       sync.Mutex
		order    = map[string][]string{} // account → amounts, in handling order
		maxChunk int
	)
	p := start(pipeline.Options[string, string]{
		Name: "ledger",
		Processors: processor.Options[string, string]{
			Concurrency: 3,
			MaxDemand:   2,
			PartitionBy: func(m *message.Message[string]) string {
				account, _, _ := strings.Cut(m.Data, " ")
				return account
			},
			Prepare: func(_ context.Context, msgs []*message.Message[string]) error {
				mu.Lock()
				maxChunk = max(maxChunk, len(msgs))
				mu.Unlock()
				return nil
			},
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				account, amount, _ := strings.Cut(m.Data, " ")
				mu.Lock()
				order[account] = append(order[account], amount)
				mu.Unlock()
				if strings.HasPrefix(amount, "-") {
					return "", fmt.Errorf("%s: withdrawals are not accepted", account)
				}
				return m.Data, nil
			},
		},
	})
	if p == nil {
		return
	}
	ctx := context.Background()
	defer p.Stop(ctx)

	outcomes, err := p.Test(ctx, "alice 5", "bob 7", "alice 2", "carol 1", "bob -4", "alice 9", "carol 3", "bob 6")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range outcomes { // in push order
		if o.Err != nil {
			fmt.Printf("failed: %v (%s)\n", o.Err, o.Disposition)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, account := range slices.Sorted(maps.Keys(order)) {
		fmt.Println(account, order[account])
	}
	fmt.Println("chunks of at most MaxDemand:", maxChunk <= 2)
	// Output:
	// failed: bob: withdrawals are not accepted (default)
	// alice [5 2 9]
	// bob [7 -4 6]
	// carol [1 3]
	// chunks of at most MaxDemand: true
}

// start builds and starts a pipeline, printing the error and returning nil
// when it cannot.
func start[Out any](opts pipeline.Options[string, Out]) *pipeline.Pipeline[string, Out] {
	p, err := pipeline.New(opts)
	if err == nil {
		err = p.Start(context.Background())
	}
	if err != nil {
		fmt.Println(err)
		return nil
	}
	return p
}
