package acker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/acker"
)

// printer is an Acknowledger that prints what it is told.
type printer struct{ name string }

func (p *printer) Ack(_ context.Context, successful, failed []acker.Outcome) {
	fmt.Printf("%s: %d ok, %d failed\n", p.name, len(successful), len(failed))
	for _, o := range failed {
		fmt.Printf("  %d: %v\n", o.ID, o.Err)
	}
}

// A stage collects a chunk's outcomes in a Group and flushes it: every
// acknowledger is called once, however many messages it had in the chunk.
func ExampleGroup() {
	kafka, pulsar := &printer{"kafka"}, &printer{"pulsar"}
	var g acker.Group
	g.Add(kafka, acker.Outcome{ID: 1})
	g.Add(pulsar, acker.Outcome{ID: 2})
	g.Add(kafka, acker.Outcome{ID: 3, Err: errors.New("bad payload")})
	g.Add(kafka, acker.Outcome{ID: 4})
	g.Flush(context.Background(), nil)
	// Output:
	// kafka: 2 ok, 1 failed
	//   3: bad payload
	// pulsar: 1 ok, 0 failed
}

// A source's acknowledger settles each outcome with its broker: it commits
// what succeeded and what failed for good (DispositionDiscard), and asks
// for everything else again, a message the shutdown interrupted included
// (Interrupted), which never counts as handled. Func turns a function into
// an Acknowledger; a pointer to it is comparable, so a Group makes one call
// with the whole chunk.
func ExampleFunc() {
	calls := 0
	settle := acker.Func(func(_ context.Context, successful, failed []acker.Outcome) {
		calls++
		for _, o := range successful {
			fmt.Printf("commit %d\n", o.ID)
		}
		for _, o := range failed {
			switch {
			case acker.Interrupted(o):
				fmt.Printf("redeliver %d: interrupted\n", o.ID)
			case o.Disposition == acker.DispositionDiscard:
				fmt.Printf("commit %d although it failed: %v\n", o.ID, o.Err)
			default: // DispositionDefault, DispositionRetry
				fmt.Printf("redeliver %d: %v\n", o.ID, o.Err)
			}
		}
	})

	var g acker.Group
	g.Add(&settle, acker.Outcome{ID: 1})
	g.Add(&settle, acker.Outcome{ID: 2, Err: errors.New("gateway timeout"), Disposition: acker.DispositionRetry})
	g.Add(&settle, acker.Outcome{ID: 3, Err: errors.New("malformed"), Disposition: acker.DispositionDiscard})
	g.Add(&settle, acker.Outcome{ID: 4, Err: acker.WrapShutdown(context.Canceled), Disposition: acker.DispositionRetry})
	g.Add(&settle, acker.Outcome{ID: 5})
	g.Flush(context.Background(), nil)
	fmt.Println("calls:", calls)
	// Output:
	// commit 1
	// commit 5
	// redeliver 2: gateway timeout
	// commit 3 although it failed: malformed
	// redeliver 4: interrupted
	// calls: 1
}
