package topic_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// A tracked publish reporting through a callback allocates nothing once
// the publisher is warm: its ticket is recycled. So on a balanced
// subscription and on a broadcast topic that waits for every subscriber's
// ack.
func TestTrackedPublishFuncAllocatesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		opts topic.Options
		mode topic.SubscriptionMode
	}{
		{"balanced", topic.Options{}, topic.Balanced("g")},
		{"broadcast", topic.Options{Mode: topic.BroadcastOnly, Broadcast: topic.BroadcastPolicy{AckMode: topic.AckAll, OnLag: topic.Disconnect},
			AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto}}, topic.Broadcast()},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newIntTopic(t, c.opts)
			sub := subscribeInt(t, h, c.mode)
			p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Minute})
			ctx := testCtx(t)
			var acked atomic.Int64
			done := func(r topic.Result) {
				if r.Outcome == topic.Acked {
					acked.Add(1)
				}
			}
			hop := func() {
				if err := p.PublishFunc(ctx, 1, done); err != nil {
					t.Fatal(err)
				}
				it, err := sub.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := sub.Ack(it.ID); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 { // warm the subscription's and the publisher's state
				hop()
			}
			if allocs := testing.AllocsPerRun(1000, hop); allocs != 0 {
				t.Fatalf("%.2f allocations per tracked publish, want 0", allocs)
			}
			if got := acked.Load(); got != 1100+1 { // AllocsPerRun runs once more to warm up
				t.Fatalf("%d publishes acked, want 1101", got)
			}
		})
	}
}

// An ack that arrives after its publish timed out is ignored: it does not
// settle the publish that reuses the ticket, and that publish keeps its
// own outcome.
func TestLateAckDoesNotSettleLaterPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		sub, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		p, err := h.Tracked(topic.TrackedOptions{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx := context.Background()
		var log outcomeLog
		publish := func(i int) topic.MessageID {
			if err := p.PublishFunc(ctx, i, log.done(i)); err != nil {
				t.Fatal(err)
			}
			it, err := sub.Receive(ctx)
			if err != nil || it.Value != i {
				t.Fatalf("received %+v, %v; want value %d", it, err, i)
			}
			return it.ID
		}

		first := publish(1)
		time.Sleep(2 * time.Second) // the first publish times out
		synctest.Wait()
		if o := log.of(1); len(o) != 1 || o[0] != topic.TimedOut {
			t.Fatalf("first publish: %v, want [timed_out]", o)
		}
		second := publish(2)
		// The late ack: the first publish is settled already.
		if err := sub.Ack(first); !errors.Is(err, topic.ErrMessageNotTracked) {
			t.Fatalf("late Ack = %v, want ErrMessageNotTracked", err)
		}
		// The first ticket is free now: the third publish may reuse it.
		third := publish(3)
		if err := sub.Ack(first); !errors.Is(err, topic.ErrMessageNotTracked) {
			t.Fatalf("second late Ack = %v, want ErrMessageNotTracked", err)
		}
		synctest.Wait()
		if o2, o3 := log.of(2), log.of(3); len(o2) != 0 || len(o3) != 0 {
			t.Fatalf("late acks settled later publishes: second %v, third %v", o2, o3)
		}
		if err := sub.Nack(third, nil); err != nil {
			t.Fatal(err)
		}
		if err := sub.Ack(second); err != nil {
			t.Fatal(err)
		}
		if o1, o2, o3 := log.of(1), log.of(2), log.of(3); len(o1) != 1 || len(o2) != 1 || o2[0] != topic.Acked || len(o3) != 1 || o3[0] != topic.Nacked {
			t.Fatalf("outcomes: first %v, second %v, third %v; want [timed_out] [acked] [nacked]", o1, o2, o3)
		}
	})
}

// Under concurrent publishes, acks, nacks and timeouts, every tracked
// publish reports exactly one outcome, however its ticket was recycled.
func TestRecycledTicketsReportEachPublishOnce(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{Timeout: time.Millisecond, MaxInFlight: 16})
	ctx := testCtx(t)
	const n = 3000
	var calls [n]atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			it, err := sub.Receive(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if i%5 == 0 {
				time.Sleep(50 * time.Microsecond) // let some time out first
			}
			if it.Value%3 == 0 {
				_ = sub.Nack(it.ID, nil)
			} else {
				_ = sub.Ack(it.ID)
			}
		}
	})
	for i := range n {
		if err := p.PublishFunc(ctx, i, func(topic.Result) { calls[i].Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	p.Close()
	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Fatalf("publish %d reported %d outcomes, want 1", i, c)
		}
	}
}
