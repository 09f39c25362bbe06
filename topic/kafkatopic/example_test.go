package kafkatopic_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// A topic on Kafka is declared and used as an in-memory one: here a mixed
// topic with a balanced group and a broadcast subscriber, on an in-process
// Kafka cluster.
func ExampleNew() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	b, err := kafkatopic.New(kafkatopic.Options[string]{
		Brokers: cluster.ListenAddrs(),
		Codec:   topic.StringCodec{},
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close(context.Background())

	broker := topic.NewBroker[string]()
	defer broker.Close()
	orders, err := broker.CreateTopic("shop/orders", topic.Options{Mode: topic.Mixed}, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	workers, _ := orders.Subscribe(ctx, topic.Balanced("billing"), topic.SubscriberOptions{})
	audit, _ := orders.Subscribe(ctx, topic.Broadcast(), topic.SubscriberOptions{})

	_ = orders.Publish(ctx, "order-1") // returns once the broker stored it
	it, _ := workers.Receive(ctx)
	fmt.Println("billing got", it.Value, "ack:", workers.Ack(it.ID)) // committed for the group
	it, _ = audit.Receive(ctx)
	fmt.Println("audit got", it.Value)
	fmt.Println("kafka topic", kafkatopic.KafkaTopic("shop/orders"), "group", kafkatopic.GroupID("shop/orders", "billing"))
	// Output:
	// billing got order-1 ack: <nil>
	// audit got order-1
	// kafka topic shop.orders group shop.orders:billing
}
