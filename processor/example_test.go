package processor_test

import (
	"context"
	"fmt"
	"strings"

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

	p, err := pipeline.New(pipeline.Options[string, int]{
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
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
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
