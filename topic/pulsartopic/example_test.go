package pulsartopic_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// A topic on Pulsar is declared, published to and consumed exactly like an
// in-memory one; a balanced group is a Shared subscription, and an ack is
// settled with the broker.
func ExampleNew() {
	ctx := context.Background()
	// An in-process broker for the example; use your cluster's service URL.
	b, _ := pulsartest.Start(ctx, pulsartest.Options{Logger: slog.New(slog.DiscardHandler)})
	defer b.Close()

	backend, err := pulsartopic.New(pulsartopic.Options[string]{
		ServiceURL:  b.URL(),
		Codec:       topic.StringCodec{},
		SendTimeout: -1,
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close(ctx)

	broker := topic.NewBroker[string]()
	defer broker.Close()
	orders, err := broker.CreateTopicsContext(ctx, []topic.Declaration[string]{{Name: "orders", Backend: backend}})
	if err != nil {
		fmt.Println(err)
		return
	}
	workers, _ := orders[0].Subscribe(ctx, topic.Balanced("workers"), topic.SubscriberOptions{})
	defer workers.Close()

	_ = orders[0].Publish(ctx, "book") // returns once the broker stored it
	it, _ := workers.Receive(ctx)
	fmt.Println("received", it.Value)
	fmt.Println("ack:", workers.Ack(it.ID))
	fmt.Println("stored on", backend.TopicName("orders"))
	// Output:
	// received book
	// ack: <nil>
	// stored on persistent://public/default/orders
}
