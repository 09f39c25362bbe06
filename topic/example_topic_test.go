package topic_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/topic"
)

// Work distribution: each message goes to exactly one member of a group.
func ExampleBroker() {
	ctx := context.Background()
	broker := topic.NewBroker[string]()
	defer broker.Close()

	orders, err := broker.CreateInMemoryTopic("orders", topic.Options{Mode: topic.BalancedOnly})
	if err != nil {
		fmt.Println(err)
		return
	}
	worker, _ := orders.Subscribe(ctx, topic.Balanced("workers"), topic.SubscriberOptions{})
	_ = orders.Publish(ctx, "order-1")
	_ = orders.Publish(ctx, "order-2")

	for range 2 {
		it, _ := worker.Receive(ctx)
		fmt.Println(it.Value)
	}
	fmt.Println(broker.Names())
	// Output:
	// order-1
	// order-2
	// [orders]
}

// Fan-out: every broadcast subscriber sees every message from its subscribe
// point; a slow one is told how many it missed.
func ExampleHandle_Subscribe_broadcast() {
	ctx := context.Background()
	audit, _ := topic.NewTopic[int]("audit", topic.Options{
		Mode:      topic.BroadcastOnly,
		Broadcast: topic.BroadcastPolicy{Capacity: 2, OnLag: topic.DropOldest},
	}, nil)
	defer audit.Close()

	fast, _ := audit.Subscribe(ctx, topic.Broadcast(), topic.SubscriberOptions{})
	slow, _ := audit.Subscribe(ctx, topic.Broadcast(), topic.SubscriberOptions{})
	var seen []int
	for i := 1; i <= 4; i++ {
		_ = audit.Publish(ctx, i)
		it, _ := fast.Receive(ctx)
		seen = append(seen, it.Value)
	}
	fmt.Println(seen)
	for range 3 {
		it, _ := slow.Receive(ctx)
		if it.Lagged > 0 {
			fmt.Println("missed", it.Lagged)
			continue
		}
		fmt.Println(it.Value)
	}
	// Output:
	// [1 2 3 4]
	// missed 2
	// 3
	// 4
}

// Ack propagation with ack_mode all: the publisher learns the outcome only
// once every subscriber that was connected at publish time acked, or as
// soon as one nacks.
func ExampleTrackedPublisher() {
	ctx := context.Background()
	events, err := topic.NewTopic[string]("events", topic.Options{
		Mode:           topic.BroadcastOnly,
		Broadcast:      topic.BroadcastPolicy{OnLag: topic.Disconnect, AckMode: topic.AckAll},
		AckPropagation: topic.AckPropagation{Mode: topic.PropagationAuto},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer events.Close()
	b, _ := events.Subscribe(ctx, topic.Broadcast(), topic.SubscriberOptions{})
	c, _ := events.Subscribe(ctx, topic.Broadcast(), topic.SubscriberOptions{})
	pub, _ := events.Tracked(topic.TrackedOptions{})

	receipt, _ := pub.Publish(ctx, "e1")
	itB, _ := b.Receive(ctx)
	_ = b.Ack(itB.ID)
	_, done := receipt.Result()
	fmt.Println("resolved after B:", done)
	itC, _ := c.Receive(ctx)
	_ = c.Ack(itC.ID)
	res, _ := receipt.Wait(ctx)
	fmt.Println(res.Outcome)

	receipt, _ = pub.Publish(ctx, "e2")
	itB, _ = b.Receive(ctx)
	itC, _ = c.Receive(ctx)
	_ = b.Ack(itB.ID)
	_ = c.Nack(itC.ID, errors.New("C failed"))
	res, _ = receipt.Wait(ctx)
	fmt.Println(res.Outcome, res.Reason)
	// Output:
	// resolved after B: false
	// acked
	// nacked C failed
}

// A pipeline resolves its local aliases through a TopicSet; detaching an
// alias leaves the topic open for everyone else.
func ExampleTopicSet() {
	ctx := context.Background()
	h, _ := topic.NewTopic[int]("raw", topic.Options{}, nil)
	defer h.Close()
	sub, _ := h.Subscribe(ctx, topic.Balanced("g"), topic.SubscriberOptions{})

	set := topic.NewTopicSet[int]()
	_ = set.Bind("out", topic.Binding[int]{Handle: h, OnFull: topic.DropNewest})
	out, _ := set.Get("out")
	outcome, _ := out.Publish(ctx, 42)
	fmt.Println(outcome, set.Aliases())

	set.Remove("out")
	fmt.Println(h.Publish(ctx, 43)) // still open
	it, _ := sub.Receive(ctx)
	fmt.Println(it.Value)
	// Output:
	// published [out]
	// <nil>
	// 42
}
