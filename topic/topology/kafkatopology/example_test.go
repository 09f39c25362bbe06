package kafkatopology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
)

// A topology on Kafka: the main topic, its hold topic and its DLQ are
// Kafka topics with the derived names; a rejected order is dead-lettered
// with its death metadata in record headers.
func ExampleNew() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	// An in-process cluster for the example; use your cluster's brokers.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	be, err := kafkatopology.New(kafkatopology.Options[string]{
		Brokers: cluster.ListenAddrs(),
		Codec:   topic.StringCodec{},
		Logger:  quiet,
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
		_ = pub.Publish(ctx, o) // returns once the broker stored it
	}
	for deadline := time.Now().Add(30 * time.Second); src.Stats().Acked+src.Stats().DeadLettered < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // poll: every order settled
	}
	_ = p.Stop(ctx)

	for _, name := range top.Names() {
		fmt.Println(kafkatopic.KafkaTopic(topic.Name(name)))
	}
	// Any Kafka client reads the DLQ: here franz-go.
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumeTopics(kafkatopic.KafkaTopic("orders-dlq")), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl.PollFetches(pollCtx).EachRecord(func(r *kgo.Record) {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		fmt.Printf("dead: %s (%s: %s)\n", r.Value,
			h[kafkatopology.HeaderDeathReason], h[kafkatopology.HeaderDeathError])
	})
	// Output:
	// orders
	// orders-hold-5s
	// orders-dlq
	// dead: order-2 (rejected: malformed amount)
}
