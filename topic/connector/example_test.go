package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/connector"
)

// A topic document names its connections; the connector makes each one's
// backend, reading the SASL password from the environment variable the
// document names when it connects. Here the connection is an in-process
// Kafka cluster that requires SCRAM-SHA-512.
func ExampleNew() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "orders-svc", "s3cret"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	os.Setenv("ORDERS_KAFKA_PASSWORD", "s3cret") // in production, from the deployment's secrets
	defer os.Unsetenv("ORDERS_KAFKA_PASSWORD")

	doc := []byte(`
connections:
  main:
    kind: kafka
    brokers: [` + cluster.ListenAddrs()[0] + `]
    sasl: {mechanism: SCRAM-SHA-512, username: orders-svc, password_env: ORDERS_KAFKA_PASSWORD}
topics:
  orders: {backend: kafka, connection: main}
`)
	connect, err := connector.New(connector.Options[string]{
		Codec:  topic.StringCodec{},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	broker := topic.NewBroker[string]()
	defer broker.Close()
	wiring := config.Wiring{Pipelines: []config.Pipeline{{Name: "billing",
		Subscribes: []config.Subscribe{{Topic: "orders", Mode: config.Balanced, ConsumerGroup: "billing"}}}}}
	wired, err := config.LoadContext(ctx, doc, wiring, broker, config.BuildOptions[string]{Connect: connect})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer wired.Close(context.Background())

	orders := wired.Topics["orders"]
	sub, _ := orders.Subscribe(ctx, topic.Balanced("billing"), topic.SubscriberOptions{})
	defer sub.Close()
	_ = orders.Publish(ctx, "order-1")
	it, err := sub.Receive(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(orders.Backend(), "delivered", it.Value, "ack:", sub.Ack(it.ID))
	// Output:
	// kafka delivered order-1 ack: <nil>
}
