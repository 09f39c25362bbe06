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
	p := start(pipeline.Options[string, string]{
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
	})
	if p == nil {
		return
	}
	ctx := context.Background()
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

// A processor gives each message a batch key (here its region): a batcher
// keeps one open batch per key, so a batch never mixes keys, and each key's
// batches fill up on their own. PartitionBy, by the same key, gives each
// key a batcher partition of its own, which batches and handles its
// messages in the order they arrived while another partition handles the
// other key's.
func Example_batchKeys() {
	p := start(pipeline.Options[string, string]{
		Name: "orders",
		Processors: processor.Options[string, string]{
			Concurrency: 1,
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
				region, _, _ := strings.Cut(m.Data, ":")
				m.SetBatcher("by-region")
				m.SetBatchKey(region)
				return m.Data, nil
			},
		},
		Batchers: []batcher.Options[string]{{
			Name:         "by-region",
			BatchSize:    2,
			BatchTimeout: time.Hour,
			Concurrency:  2,
			PartitionBy:  func(m *message.Message[string]) string { return m.BatchKey() },
			Handle: func(_ context.Context, batch []*message.Message[string], info message.BatchInfo) error {
				orders := make([]string, len(batch))
				for i, m := range batch {
					_, orders[i], _ = strings.Cut(m.Data, ":")
				}
				fmt.Printf("%s: %s\n", info.BatchKey, strings.Join(orders, " "))
				return nil
			},
		}},
	})
	if p == nil {
		return
	}
	ctx := context.Background()
	defer p.Stop(ctx)

	// TestBatch pushes the messages in bulk mode and waits for their outcomes.
	if _, err := p.TestBatch(ctx, strings.Fields("eu:1 us:2 eu:3 eu:4 us:5 eu:6 us:7 us:8")...); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// eu: 1 3
	// eu: 4 6
	// us: 2 5
	// us: 7 8
}

// start builds and starts a pipeline that routes its messages explicitly
// (SetBatcher), printing the error and returning nil when it cannot.
func start(opts pipeline.Options[string, string]) *pipeline.Pipeline[string, string] {
	opts.ExplicitRouting = true
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
