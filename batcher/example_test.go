package batcher_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
)

// A batcher emits a batch when it reaches BatchSize, at once when a message in
// flush mode joins it, and with whatever is left when its input is closed.
func ExampleNew() {
	rec := acker.NewRecorder(false)
	b := batcher.New(batcher.Options[string]{
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
	}.WithDefaults(), batcher.Config{Name: "example"})

	ctx := context.Background()
	var wg sync.WaitGroup
	b.Start(ctx, &wg)

	var msgs []*message.Message[string]
	for i, w := range strings.Fields("a b c d e f g") {
		m := message.New(w, rec, uint64(i))
		if w == "e" {
			m.SetBatchMode(message.Flush)
		}
		msgs = append(msgs, m)
	}
	if _, err := b.Publish(ctx, msgs); err != nil {
		fmt.Println(err)
	}
	b.CloseInput()
	<-b.Done()
	wg.Wait()
	fmt.Println("acknowledged:", rec.Total())
	// Output:
	// words: a b c (size)
	// words: d e (flush)
	// words: f g (flush)
	// acknowledged: 7
}
