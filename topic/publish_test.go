package topic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// Mixed topic, ack_mode first: a publish that reaches only balanced groups is acked by the group, not nacked for want of subscribers.
func TestMixedGroupsCountAsRecipients(t *testing.T) {
	h := newIntTopic(t, topic.Options{Mode: topic.Mixed})
	sub := subscribeInt(t, h, topic.Balanced("g"))
	p := newTracked(t, h, topic.TrackedOptions{})
	r, err := p.Publish(testCtx(t), 7)
	if err != nil {
		t.Fatal(err)
	}
	it, err := sub.Receive(testCtx(t))
	if err != nil || it.Value != 7 {
		t.Fatalf("Receive = %+v, %v", it, err)
	}
	if err := sub.Ack(it.ID); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	res, err := r.Wait(testCtx(t))
	if err != nil || res.Outcome != topic.Acked {
		t.Fatalf("receipt = %+v, %v; want Acked", res, err)
	}
}

// A per-publisher on_full override (PublishWith DropNewest) wins over the topic's block policy.
func TestPublishWithOverridesOnFull(t *testing.T) {
	h := newIntTopic(t, topic.Options{Balanced: topic.BalancedPolicy{Capacity: 1, OnFull: topic.Block}})
	subscribeInt(t, h, topic.Balanced("g"))
	if err := h.Publish(testCtx(t), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := h.PublishWith(ctx, 1, topic.DropNewest)
	if err != nil || out != topic.DroppedOnFull {
		t.Fatalf("PublishWith(DropNewest) into a full queue = %v, %v; want DroppedOnFull at once", out, err)
	}
}

// A context that is already done publishes nothing and Publish returns
// ctx.Err(), also on a balanced-only topic whose group does not exist (yet,
// or any more): a publisher loop that stops on error must stop.
func TestDoneContextPublishesNothingWithoutAGroup(t *testing.T) {
	h := newIntTopic(t, topic.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Publish(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a cancelled ctx and no group = %v, want context.Canceled", err)
	}
	if st := h.Stats(); st.Published != 0 {
		t.Fatalf("Stats.Published = %d after a cancelled publish, want 0", st.Published)
	}
}
