package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: every call of the in-memory backend, its queues and readers
// that uses its context, and Publisher.Publish, Replay, Source.Run and
// Source.Close, return an error matching ErrNilContext for a nil one,
// rather than panicking, and publish, hold, subscribe and receive nothing;
// the source stays open.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	m, err := topology.NewMemory[int](topology.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	tp, err := topology.New("t").ForConsumerGroup("g").Hold(time.Hour).DLQ().Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	q, err := m.Declare(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.DeadLetter(ctx, topology.Letter[int]{Value: 7}); err != nil {
		t.Fatal(err)
	}
	r, err := q.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	pub, err := topology.NewPublisher(q, topology.PublisherOptions[int]{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q})
	if err != nil {
		t.Fatal(err)
	}

	calls := []struct {
		name string
		f    func() error
	}{
		{"Memory.Declare", func() error { _, err := m.Declare(nilCtx, tp); return err }},
		{"Queues.Publish", func() error { return q.Publish(nilCtx, topology.Letter[int]{Value: 1}) }},
		{"Queues.Subscribe", func() error { _, err := q.Subscribe(nilCtx); return err }},
		{"Queues.Hold", func() error { return q.Hold(nilCtx, 0, topology.Letter[int]{Value: 1}) }},
		{"Queues.SubscribeDead", func() error { _, err := q.SubscribeDead(nilCtx); return err }},
		{"Reader.Receive", func() error { _, err := r.Receive(nilCtx, make([]topology.Letter[int], 4)); return err }},
		{"Publisher.Publish", func() error { return pub.Publish(nilCtx, 1) }},
		{"Replay", func() error { _, err := topology.Replay(nilCtx, q, topology.ReplayOptions[int]{}); return err }},
		{"Source.Run", func() error { return src.Run(nilCtx, new(producer.Stage[int])) }},
		{"Source.Close", func() error { return src.Close(nilCtx) }},
	}
	for _, c := range calls {
		if err := within.Run(5*time.Second, c.f); !errors.Is(err, topology.ErrNilContext) {
			t.Errorf("%s(nil ctx) = %v, want ErrNilContext", c.name, err)
		}
	}

	if n := m.Queued("t", "g"); n != 0 {
		t.Errorf("Queued(t, g) after the nil-context calls = %d, want 0", n)
	}
	if n := m.Held(tp.Holds()[0].Name); n != 0 {
		t.Errorf("Held after the nil-context calls = %d, want 0", n)
	}
	if n := m.Queued(dlqName(tp), "dead"); n != 1 {
		t.Errorf("DLQ letters after the nil-context calls = %d, want the 1 dead-lettered before", n)
	}
	if err := src.Close(ctx); err != nil {
		t.Errorf("Source.Close after Close(nil) = %v, want nil", err)
	}
}

// dlqName is the name of tp's DLQ.
func dlqName(tp *topology.Topology) string {
	name, _ := tp.DLQ()
	return name
}
