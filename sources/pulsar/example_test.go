package pulsar_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
)

// A pipeline consuming a Pulsar topic. The client is created and closed by
// the application, around the pipeline; here it talks to the in-process
// broker of pulsartest, seeded with three messages.
func Example() {
	ctx := context.Background()
	broker, err := pulsartest.Start(ctx, pulsartest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	for _, s := range []string{"alpha", "beta", "gamma"} {
		if _, err := broker.Publish(ctx, "greetings", pulsartest.Message{Payload: []byte(s), Key: "k-" + s}); err != nil {
			log.Fatal(err)
		}
	}

	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: broker.URL(), Logger: quietLogger()})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // after the pipeline: the source never closes it

	var (
		mu   sync.Mutex
		seen []string
		done = make(chan struct{})
	)
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name: "greetings",
		Producer: producer.Options[[]byte]{Source: bpulsar.New(bpulsar.Options{
			Client:       client,
			Topics:       []string{"greetings"},
			Subscription: "example",
			Consumer:     pulsar.ConsumerOptions{SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest},
		})},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				md, _ := message.MetadataAs[*bpulsar.Metadata](m)
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, fmt.Sprintf("%s key=%s redelivered=%d", m.Data, md.Key, md.RedeliveryCount))
				if len(seen) == 3 {
					close(done)
				}
				return m.Data, nil
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-done
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Stop(stopCtx); err != nil { // drains, acks, closes the consumers
		log.Fatal(err)
	}
	slices.Sort(seen)
	for _, s := range seen {
		fmt.Println(s)
	}
	fmt.Println("backlog:", broker.Backlog("greetings", "example"))
	// Output:
	// alpha key=k-alpha redelivered=0
	// beta key=k-beta redelivered=0
	// gamma key=k-gamma redelivered=0
	// backlog: 0
}
