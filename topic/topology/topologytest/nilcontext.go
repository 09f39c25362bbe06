package topologytest

import (
	"context"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// nilCtx is the nil context the calls of nilContextIsAnError are given.
var nilCtx context.Context

// Guarantee: Declare, the calls of the queues it made that take a context
// (Publish, Subscribe, Hold, Requeue, DeadLetter, SubscribeDead), a
// reader's Receive, TryReceive and Close, a DLQ reader's PinEnd (where it
// has one), and the backend's Close return
// an error matching topology.ErrNilContext for a nil context, rather than
// panicking or waiting, and do nothing: no letter is published, held,
// requeued, dead-lettered or consumed, the reader stays open and the
// backend keeps declaring.
func nilContextIsAnError(s *h) {
	b := topology.New("nilctx").Hold(hold1).DLQ()
	top, err := b.Build()
	if err != nil {
		s.Fatalf("Build: %v", err)
	}
	q := s.declare(b)
	r, err := q.Subscribe(s.ctx)
	if err != nil {
		s.Fatalf("Subscribe: %v", err)
	}
	s.Cleanup(func() { MustClose(s.T, "the reader", r.Close) })
	s.publish(q, Msg{N: 1})
	l := topology.Letter[Msg]{Value: Msg{N: 2}}
	dead := topology.Letter[Msg]{Value: Msg{N: 3}, Death: &topology.Death{Reason: topology.ReasonRejected,
		Error: "rejected", Topic: "nilctx", Group: "nilctx"}}
	buf := make([]topology.Letter[Msg], 4)

	dr, err := q.SubscribeDead(s.ctx)
	if err != nil {
		s.Fatalf("SubscribeDead: %v", err)
	}
	pinner, _ := dr.(topology.EndPinner)

	calls := []within.Call{
		{Name: "Backend.Declare", F: func() error { _, err := s.be.Declare(nilCtx, top); return err }},
		{Name: "Queues.Publish", F: func() error { return q.Publish(nilCtx, l) }},
		{Name: "Queues.Subscribe", F: func() error { _, err := q.Subscribe(nilCtx); return err }},
		{Name: "Queues.Hold", F: func() error { return q.Hold(nilCtx, 0, l) }},
		{Name: "Queues.Requeue", F: func() error { return q.Requeue(nilCtx, l) }},
		{Name: "Queues.DeadLetter", F: func() error { return q.DeadLetter(nilCtx, dead) }},
		{Name: "Queues.SubscribeDead", F: func() error { _, err := q.SubscribeDead(nilCtx); return err }},
		{Name: "Reader.Receive", F: func() error { _, err := r.Receive(nilCtx, buf); return err }},
		{Name: "Reader.TryReceive", F: func() error { _, err := r.TryReceive(nilCtx, buf); return err }},
		{Name: "Reader.Close", F: func() error { return r.Close(nilCtx) }},
		{Name: "Backend.Close", F: func() error { return s.be.Close(nilCtx) }},
	}
	if pinner != nil {
		calls = append(calls, within.Call{Name: "EndPinner.PinEnd", F: func() error { return pinner.PinEnd(nilCtx) }})
	}
	within.Refused(s.T, 10*time.Second, topology.ErrNilContext, calls...)
	if pinner != nil {
		// A pinned reader at its end refuses a nil context too, rather
		// than answering that it has nothing more.
		if err := pinner.PinEnd(s.ctx); err != nil {
			s.Fatalf("PinEnd: %v", err)
		}
		within.Refused(s.T, 10*time.Second, topology.ErrNilContext,
			within.Call{Name: "pinned Reader.TryReceive", F: func() error { _, err := dr.TryReceive(nilCtx, buf); return err }},
			within.Call{Name: "pinned Reader.Receive", F: func() error { _, err := dr.Receive(nilCtx, buf); return err }})
	}
	MustClose(s.T, "the DLQ reader", dr.Close)

	// The reader and the backend are as they were: the letter published
	// before is received, and only it, and the backend declares again.
	if dl := s.dead(q); len(dl) != 0 {
		s.Errorf("DLQ after the nil-context calls holds %v, want nothing", dl)
	}
	s.declare(b)
	seen := map[int]bool{}
	s.receiveInto("the reader after the nil-context calls", r, seen, len(buf), 1)
	if !seen[1] || len(seen) != 1 {
		s.Errorf("received %v after the nil-context calls, want only 1", seen)
	}
	s.publish(q, Msg{N: 4})
	s.receiveInto("the reader after the nil-context calls", r, seen, 1, 2)
	if !seen[4] || len(seen) != 2 {
		s.Errorf("received %v after the nil-context calls, want 1 then 4", seen)
	}
}
