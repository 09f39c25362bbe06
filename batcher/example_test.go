package batcher_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// A batcher in a pipeline emits a batch when it reaches BatchSize, at once
// when a message in flush mode joins it, and with whatever is left when the
// pipeline drains.
func Example() {
	rec := acker.NewRecorder(false)
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name: "example",
		Processors: processor.Options[string, string]{
			Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				m.SetBatcher("words")
				if m.Data == "e" {
					m.SetBatchMode(message.Flush)
				}
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[string]{{
			Name:         "words",
			BatchSize:    3,
			BatchTimeout: time.Hour,
			Handle: func(_ context.Context, batch []*message.Message[string], info message.BatchInfo) error {
				words := make([]string, len(batch))
				for i, m := range batch {
					words[i] = m.Data
				}
				fmt.Printf("%s: %s (%s)\n", info.Batcher, strings.Join(words, " "), info.Trigger)
				return nil
			},
		}},
		ExplicitRouting: true,
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
	var msgs []*message.Message[string]
	for i, w := range strings.Fields("a b c d e f g") {
		msgs = append(msgs, message.New(w, rec, uint64(i)))
	}
	if err := p.Push(ctx, msgs...); err != nil {
		fmt.Println(err)
	}
	// Stop drains: the open batch "f g" is emitted with trigger flush.
	if err := p.Stop(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("acknowledged:", rec.Total())
	// Output:
	// words: a b c (size)
	// words: d e (flush)
	// words: f g (flush)
	// acknowledged: 7
}
