package pulsartopology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// A topology on Pulsar: the main topic, its hold topic and its DLQ are
// Pulsar topics with the derived names; a rejected order is dead-lettered
// with its death metadata in message properties.
func ExampleNew() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	// An in-process broker for the example; use your cluster's service URL.
	br, _ := pulsartest.Start(ctx, pulsartest.Options{Logger: quiet})
	defer br.Close()

	be, err := pulsartopology.New(pulsartopology.Options[string]{
		ServiceURL: br.URL(),
		Codec:      topic.StringCodec{},
		Logger:     quiet,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		// A bounded close: past its deadline, what is left is cut short.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = be.Close(ctx)
	}()
	top, _ := topology.New("orders").Hold(5 * time.Second).DLQ().Build()
	q, err := be.Declare(ctx, top) // idempotent: run it on every start
	if err != nil {
		fmt.Println(err)
		return
	}

	src, _ := topology.NewSource(topology.SourceOptions[string]{Queues: q, Logger: quiet})
	p, _ := pipeline.New(pipeline.Options[string, string]{
		Name:     "orders",
		Logger:   quiet,
		Producer: producer.Options[string]{Source: src},
		Processors: processor.Options[string, string]{Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
			if m.Data == "order-2" {
				return "", topology.Reject(errors.New("malformed amount"))
			}
			return m.Data, nil
		}},
	})
	_ = p.Start(ctx)
	pub, _ := topology.NewPublisher(q, topology.PublisherOptions[string]{})
	for _, o := range []string{"order-1", "order-2", "order-3"} {
		_ = pub.Publish(ctx, o)
	}
	for deadline := time.Now().Add(10 * time.Second); src.Stats().Acked+src.Stats().DeadLettered < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // poll: every order settled
	}
	_ = p.Stop(ctx)

	for _, name := range top.Names() {
		fmt.Println(be.TopicName(name))
	}
	for _, m := range br.Messages(be.TopicName("orders-dlq")) {
		fmt.Printf("dead: %s (%s: %s)\n", m.Payload,
			m.Properties[pulsartopology.PropDeathReason], m.Properties[pulsartopology.PropDeathError])
	}
	// Output:
	// persistent://public/default/orders
	// persistent://public/default/orders-hold-5s
	// persistent://public/default/orders-dlq
	// dead: order-2 (rejected: malformed amount)
}
