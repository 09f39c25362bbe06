package pulsartest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// Start a broker, publish through the test API, consume with
// pulsar-client-go and read what the broker saw of the consumer.
func Example() {
	ctx := context.Background()
	b, err := pulsartest.Start(ctx, pulsartest.Options{})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: b.URL(), OperationTimeout: 5 * time.Second, Logger: plog.DefaultNopLogger(),
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	consumer, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: "orders", SubscriptionName: "billing", ReceiverQueueSize: 8,
	})
	if err != nil {
		panic(err)
	}
	defer consumer.Close()

	if _, err := b.PublishBatch(ctx, "orders",
		pulsartest.Message{Key: "a", Payload: []byte("first")},
		pulsartest.Message{Key: "b", Payload: []byte("second")},
	); err != nil {
		panic(err)
	}
	for range 2 {
		m, err := consumer.Receive(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s key=%s batch index=%d\n", m.Payload(), m.Key(), m.ID().BatchIdx())
		if err := consumer.Ack(m); err != nil {
			panic(err)
		}
	}
	st := b.Consumers("orders", "billing")[0]
	fmt.Println("topic:", st.Topic)
	fmt.Println("first flow:", st.Flows[0], "dispatched:", st.Dispatched)
	// Output:
	// first key=a batch index=0
	// second key=b batch index=1
	// topic: persistent://public/default/orders
	// first flow: 8 dispatched: 2
}
