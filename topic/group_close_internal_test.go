package topic

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// startCtx is a context that runs onStart the first time it is asked for
// Done. A group member's Receive asks once it has looked at whether the
// member is closed and before it takes a message from the group's queue,
// so onStart runs exactly in between.
type startCtx struct {
	context.Context
	once    sync.Once
	started bool
	onStart func()
}

func (c *startCtx) Done() <-chan struct{} {
	c.once.Do(func() {
		c.started = true
		c.onStart()
	})
	return c.Context.Done()
}

// groupOfTwo makes a topic of opts with a group of two members, leaving
// and staying, and a tracked publisher; the topic is closed at the end of
// the test.
func groupOfTwo(t *testing.T, opts Options) (h *Handle[int], leaving, staying *Subscription[int], p *TrackedPublisher[int]) {
	t.Helper()
	h, err := NewTopic[int]("t", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if leaving, err = h.Subscribe(t.Context(), Balanced("g"), SubscriberOptions{}); err != nil {
		t.Fatal(err)
	}
	if staying, err = h.Subscribe(t.Context(), Balanced("g"), SubscriberOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(staying.Close)
	if p, err = h.Tracked(TrackedOptions{Timeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return h, leaving, staying, p
}

// stayingGets checks that the group's other member receives the message 1
// and, for a tracked publish (rc not nil), that its ack settles it.
func stayingGets(t *testing.T, staying *Subscription[int], rc *Receipt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	it, err := staying.Receive(ctx)
	if err != nil || it.Value != 1 {
		t.Fatalf("the member that stays received %+v, %v; want the message 1, which the leaving member did not keep", it, err)
	}
	if rc == nil {
		return
	}
	if err := staying.Ack(it.ID); err != nil {
		t.Fatalf("Ack by the member that stays = %v", err)
	}
	if res, ok := rc.Result(); !ok || res.Outcome != Acked {
		t.Fatalf("tracked publish = %+v, %v; want Acked by the member that stays", res, ok)
	}
}

// publishOne publishes the message 1, tracked (returning its receipt) or
// not.
func publishOne(t *testing.T, h *Handle[int], p *TrackedPublisher[int], tracked bool) *Receipt {
	t.Helper()
	if !tracked {
		if err := h.Publish(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	rc, err := p.Publish(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// Guarantee: a group member whose Close begins while its Receive starts
// takes no message from the group: that Receive returns
// ErrSubscriptionClosed, and the message goes to another member of the
// group (which can ack a tracked one), not to the member that leaves.
func TestGroupMemberClosedAsItReceivesTakesNothing(t *testing.T) {
	forModesAndTracking(t, func(t *testing.T, mode Mode, tracked bool) {
		_, staying, rc := closedAsItReceives(t, mode, tracked, func(_ *Handle[int], leaving *Subscription[int]) { leaving.Close() })
		stayingGets(t, staying, rc)
	})
}

// forModesAndTracking runs f in a bubble for each of the modes with
// groups and for untracked and tracked publishing, as subtests.
func forModesAndTracking(t *testing.T, f func(t *testing.T, mode Mode, tracked bool)) {
	for _, mode := range []Mode{BalancedOnly, Mixed} {
		for _, tracked := range []bool{false, true} {
			name := mode.String() + "/untracked"
			if tracked {
				name = mode.String() + "/tracked"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { f(t, mode, tracked) })
			})
		}
	}
}

// closedAsItReceives publishes one message to a group of two of a topic
// of mode, and runs closing as the leaving member's Receive starts
// (between its look at whether it is closed and its take), which must
// then return ErrSubscriptionClosed. It returns the topic, the member
// that stays and the publish's receipt (nil when untracked).
func closedAsItReceives(t *testing.T, mode Mode, tracked bool, closing func(h *Handle[int], leaving *Subscription[int])) (*Handle[int], *Subscription[int], *Receipt) {
	t.Helper()
	h, leaving, staying, p := groupOfTwo(t, Options{Mode: mode})
	rc := publishOne(t, h, p, tracked)
	ctx := &startCtx{Context: t.Context(), onStart: func() { closing(h, leaving) }}
	if it, err := leaving.Receive(ctx); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("Receive of a member closed as it started = %+v, %v; want ErrSubscriptionClosed", it, err)
	}
	if !ctx.started {
		t.Fatal("Receive never asked its context for Done: nothing closed the member")
	}
	return h, staying, rc
}

// Guarantee: a tracked message a group member took as its subscription
// began to close (marked closed, its member not yet) goes back to the
// group: the Receive returns ErrSubscriptionClosed and another member
// receives and acks the message, instead of its publish being nacked as a
// dropped delivery.
func TestTrackedMessageTakenAsTheSubscriptionClosesGoesBackToTheGroup(t *testing.T) {
	for _, mode := range []Mode{BalancedOnly, Mixed} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, leaving, staying, p := groupOfTwo(t, Options{Mode: mode})
				rc := publishOne(t, h, p, true)
				// What Subscription.Close does first, before it closes
				// the member: a Receive running then still finds the
				// member open.
				markClosed := func() {
					leaving.mu.Lock()
					leaving.closed = true
					leaving.mu.Unlock()
				}
				ctx := &startCtx{Context: t.Context(), onStart: markClosed}
				if it, err := leaving.Receive(ctx); !errors.Is(err, ErrSubscriptionClosed) {
					t.Fatalf("Receive of a closing subscription = %+v, %v; want ErrSubscriptionClosed", it, err)
				}
				if !ctx.started {
					t.Fatal("Receive never asked its context for Done: nothing marked the subscription closed")
				}
				leaving.st.Close() // the rest of Subscription.Close
				stayingGets(t, staying, rc)
			})
		})
	}
}

// Guarantee: a message a group member took as its Close began, while the
// topic closed too, still reaches the group's other member, which receives
// it before ErrSubscriptionClosed: a topic's Close leaves its open
// subscribers what was delivered to their group before it, untracked
// messages included, whose loss nothing would report.
func TestMessageTakenAsMemberAndTopicCloseReachesTheOtherMember(t *testing.T) {
	forModesAndTracking(t, func(t *testing.T, mode Mode, tracked bool) {
		// The member closes, then the topic.
		_, staying, rc := closedAsItReceives(t, mode, tracked, func(h *Handle[int], leaving *Subscription[int]) { leaving.Close(); h.Close() })
		it, err := staying.Receive(t.Context())
		if err != nil || it.Value != 1 {
			t.Fatalf("the member that stays received %+v, %v after the topic closed; want the message 1, published before", it, err)
		}
		if _, err := staying.Receive(t.Context()); !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("the member that stays then received %v, want ErrSubscriptionClosed", err)
		}
		if tracked {
			if res, ok := rc.Result(); !ok || res.Outcome != TopicClosed {
				t.Fatalf("tracked publish = %+v, %v; want TopicClosed, as the topic's Close resolves it", res, ok)
			}
		}
	})
}
