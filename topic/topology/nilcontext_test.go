package topology_test

import (
	"context"
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

	calls := []within.Call{
		{Name: "Memory.Declare", F: func() error { _, err := m.Declare(nilCtx, tp); return err }},
		{Name: "Queues.Publish", F: func() error { return q.Publish(nilCtx, topology.Letter[int]{Value: 1}) }},
		{Name: "Queues.Subscribe", F: func() error { _, err := q.Subscribe(nilCtx); return err }},
		{Name: "Queues.Hold", F: func() error { return q.Hold(nilCtx, 0, topology.Letter[int]{Value: 1}) }},
		{Name: "Queues.SubscribeDead", F: func() error { _, err := q.SubscribeDead(nilCtx); return err }},
		{Name: "Reader.Receive", F: func() error { _, err := r.Receive(nilCtx, make([]topology.Letter[int], 4)); return err }},
		{Name: "Publisher.Publish", F: func() error { return pub.Publish(nilCtx, 1) }},
		{Name: "Replay", F: func() error { _, err := topology.Replay(nilCtx, q, topology.ReplayOptions[int]{}); return err }},
		{Name: "Source.Run", F: func() error { return src.Run(nilCtx, new(producer.Stage[int])) }},
		{Name: "Source.Close", F: func() error { return src.Close(nilCtx) }},
	}
	within.Refused(t, 5*time.Second, topology.ErrNilContext, calls...)

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
