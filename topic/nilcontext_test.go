package topic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/topic"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: every call of the topic package that takes a context returns
// an error matching ErrNilContext for a nil one, rather than panicking, and
// publishes, subscribes, receives and registers nothing.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	opts := topic.Options{
		Mode:           topic.Mixed,
		AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto},
	}
	b := topic.NewBroker[int]()
	defer b.Close()
	h, err := b.CreateTopic("t", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	g, err := h.Subscribe(ctx, topic.Balanced("g"), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bc, err := h.Subscribe(ctx, topic.Broadcast(), topic.SubscriberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	tp, err := h.Tracked(topic.TrackedOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	rc, err := tp.Publish(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := h.Stats()
	bind := topic.Binding[int]{Handle: h, OnFull: topic.Block}
	noop := func(topic.Result) {}

	calls := []within.Call{
		{Name: "Broker.CreateTopicsContext", F: func() error {
			_, err := b.CreateTopicsContext(nilCtx, []topic.Declaration[int]{{Name: "new", Options: opts}})
			return err
		}},
		{Name: "NewTopicContext", F: func() error {
			_, err := topic.NewTopicContext[int](nilCtx, "new", opts, nil)
			return err
		}},
		{Name: "Handle.Publish", F: func() error { return h.Publish(nilCtx, 2) }},
		{Name: "Handle.PublishWith", F: func() error { _, err := h.PublishWith(nilCtx, 2, topic.Block); return err }},
		{Name: "Handle.PublishWithHeaders", F: func() error {
			_, err := h.PublishWithHeaders(nilCtx, 2, topic.Headers{"k": "v"}, topic.DropNewest)
			return err
		}},
		{Name: "Handle.Subscribe balanced", F: func() error {
			_, err := h.Subscribe(nilCtx, topic.Balanced("g2"), topic.SubscriberOptions{})
			return err
		}},
		{Name: "Handle.Subscribe broadcast", F: func() error {
			_, err := h.Subscribe(nilCtx, topic.Broadcast(), topic.SubscriberOptions{})
			return err
		}},
		{Name: "Subscription.Receive balanced", F: func() error { _, err := g.Receive(nilCtx); return err }},
		{Name: "Subscription.Receive broadcast", F: func() error { _, err := bc.Receive(nilCtx); return err }},
		{Name: "Subscription.ReceiveBatch balanced", F: func() error { _, err := g.ReceiveBatch(nilCtx, make([]topic.Item[int], 4)); return err }},
		{Name: "Subscription.ReceiveBatch broadcast", F: func() error { _, err := bc.ReceiveBatch(nilCtx, make([]topic.Item[int], 4)); return err }},
		{Name: "Binding.Publish", F: func() error { _, err := bind.Publish(nilCtx, 2); return err }},
		{Name: "TrackedPublisher.Publish", F: func() error { _, err := tp.Publish(nilCtx, 2); return err }},
		{Name: "TrackedPublisher.PublishHeaders", F: func() error { _, err := tp.PublishHeaders(nilCtx, 2, nil); return err }},
		{Name: "TrackedPublisher.PublishFunc", F: func() error { return tp.PublishFunc(nilCtx, 2, noop) }},
		{Name: "TrackedPublisher.PublishFuncHeaders", F: func() error { return tp.PublishFuncHeaders(nilCtx, 2, nil, noop) }},
		{Name: "Receipt.Wait", F: func() error { _, err := rc.Wait(nilCtx); return err }},
	}
	within.Refused(t, 5*time.Second, topic.ErrNilContext, calls...)

	if names := b.Names(); len(names) != 1 {
		t.Errorf("topics registered after the nil-context calls: %v, want only t", names)
	}
	if after := h.Stats(); after.Published != before.Published || after.BalancedGroups != before.BalancedGroups ||
		after.BroadcastSubscribers != before.BroadcastSubscribers || after.Dropped != before.Dropped ||
		after.InFlight != before.InFlight {
		t.Errorf("Stats after the nil-context calls: %+v, want as before: %+v", after, before)
	}
	// The one message published before is still there for each subscriber,
	// and nothing after it.
	for name, sub := range map[string]*topic.Subscription[int]{"balanced": g, "broadcast": bc} {
		it, err := sub.Receive(ctx)
		if err != nil || it.Value != 1 {
			t.Errorf("%s Receive after the nil-context calls = %v, %v; want 1", name, it.Value, err)
		}
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if it, err := sub.Receive(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s second Receive = %v, %v; want nothing published by the nil-context calls", name, it.Value, err)
		}
		cancel()
	}
}
