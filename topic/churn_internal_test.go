package topic

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
	"weak"
)

// Guarantee: a broadcast subscriber that leaves after a Receive of it gave
// up waiting leaves nothing behind in the ring, so subscribers that come
// and go on a quiet topic do not make it grow.
func TestBroadcastSubscribersThatLeaveLeaveNothingBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := NewTopic[int]("t", Options{Mode: BroadcastOnly}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		for range 1000 {
			sub, err := h.Subscribe(t.Context(), Broadcast(), SubscriberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
			if _, err := sub.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Receive on a quiet topic returned %v, want context.DeadlineExceeded", err)
			}
			cancel()
			sub.Close()
		}
		r := h.mem.ring
		r.mu.Lock()
		subs, waiting := len(r.subs), len(r.waiting)
		r.mu.Unlock()
		if subs != 0 || waiting != 0 {
			t.Fatalf("after 1000 subscribers came and went, the ring holds %d subscribers and %d parked ones, want 0 and 0", subs, waiting)
		}

		// Nor does the ring keep them reachable, whichever order they
		// leave in.
		var gone []weak.Pointer[ringSub[int]]
		var open []*Subscription[int]
		for range 3 {
			sub, err := h.Subscribe(t.Context(), Broadcast(), SubscriberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, sub)
			gone = append(gone, weak.Make(sub.st.(*ringSub[int])))
		}
		for i := len(open) - 1; i >= 0; i-- {
			open[i].Close()
		}
		open = nil
		runtime.GC()
		for i, w := range gone {
			if w.Value() != nil {
				t.Errorf("broadcast subscriber %d is still reachable after it left", i)
			}
		}
	})
}

// Guarantee: a subscriber that never acks the tracked messages it receives
// (a broadcast audit beside the group that acks them) does not keep them:
// what it holds for acking stays bounded by what is still unsettled.
func TestUnackedDeliveriesOfSettledPublishesAreNotKept(t *testing.T) {
	h, err := NewTopic[int]("t", Options{Mode: Mixed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	worker, err := h.Subscribe(t.Context(), Balanced("workers"), SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	audit, err := h.Subscribe(t.Context(), Broadcast(), SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	p, err := h.Tracked(TrackedOptions{MaxInFlight: 16, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var acked int
	done := func(r Result) {
		if r.Outcome == Acked {
			acked++ // called by worker.Ack, on this goroutine
		}
	}
	const n = 10000
	for i := range n {
		if err := p.PublishFunc(ctx, i, done); err != nil {
			t.Fatal(err)
		}
		it, err := worker.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := worker.Ack(it.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := audit.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if acked != n {
		t.Fatalf("%d publishes acked, want %d", acked, n)
	}
	audit.mu.Lock()
	kept := len(audit.pending)
	audit.mu.Unlock()
	if kept > 2*minSweep {
		t.Fatalf("the audit subscriber keeps %d of the %d settled messages it received, want at most %d", kept, n, 2*minSweep)
	}
}

// Guarantee: a consumer group that lost its last member is not kept
// reachable by its topic: its queue, allocated to the group's capacity
// when the group was made, is memory the topic gives back.
func TestGroupsThatGoAwayAreNotKept(t *testing.T) {
	for _, mode := range []Mode{BalancedOnly, Mixed} {
		t.Run(mode.String(), func(t *testing.T) {
			h, err := NewTopic[int]("t", Options{Mode: mode}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			names := []GroupName{"a"}
			if mode == Mixed {
				names = []GroupName{"a", "b", "c"}
			}
			var subs []*Subscription[int]
			var gone []weak.Pointer[memGroup[int]]
			for _, name := range names {
				sub, err := h.Subscribe(t.Context(), Balanced(name), SubscriberOptions{})
				if err != nil {
					t.Fatal(err)
				}
				subs = append(subs, sub)
				gone = append(gone, weak.Make(sub.member.g))
			}
			for i := len(subs) - 1; i >= 0; i-- { // the last group first
				subs[i].Close()
			}
			subs = nil
			runtime.GC()
			for i, w := range gone {
				if w.Value() != nil {
					t.Errorf("group %q is still reachable after its last member left", names[i])
				}
			}
		})
	}
}
