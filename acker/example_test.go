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
