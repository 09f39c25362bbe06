package pulsartest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// loadMessages is the message count of the load test: 3000 by default,
// PULSARTEST_LOAD_MESSAGES to grow it.
func loadMessages(t *testing.T) int {
	if v := os.Getenv("PULSARTEST_LOAD_MESSAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("PULSARTEST_LOAD_MESSAGES=%q", v)
		}
		return n
	}
	return 3000
}

// Under concurrent batching producers and shared consumers on a partitioned
// topic every message is delivered exactly once, and no consumer is ever
// pushed more than it granted.
func TestLoadSharedPartitioned(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := uniqueTopic(t)
	const partitions, producers, consumers, queue = 4, 2, 3, 50
	if err := b.CreateTopic(topic, partitions); err != nil {
		t.Fatal(err)
	}
	n := loadMessages(t)
	var cs []pulsar.Consumer
	for range consumers {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: queue})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	var wg sync.WaitGroup
	for p := range producers {
		prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 20, SendTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += producers {
				prod.SendAsync(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint(i % 17), Payload: []byte(strconv.Itoa(i))},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						if err != nil {
							t.Errorf("send: %v", err)
						}
					})
			}
			if err := prod.FlushWithCtx(ctx); err != nil {
				t.Errorf("flush: %v", err)
			}
		}()
	}
	var mu sync.Mutex
	seen := make(map[int]int, n)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) >= n
				mu.Unlock()
				if done {
					return
				}
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				m, err := c.Receive(rctx)
				rcancel()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					continue
				}
				i, _ := strconv.Atoi(string(m.Payload()))
				mu.Lock()
				seen[i]++
				mu.Unlock()
				_ = c.Ack(m)
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("received %d distinct of %d", len(seen), n)
	}
	for i, k := range seen {
		if k != 1 {
			t.Fatalf("message %d received %d times", i, k)
		}
	}
	wait.For(t, "backlog drained", func() bool { return b.Backlog(topic, "s") == 0 })
	for _, st := range b.Consumers(topic, "s") {
		if st.Dispatched > st.PermitsGranted || st.MaxAvailable > queue || st.Available < 0 {
			t.Fatalf("permits exceeded: %+v", st)
		}
	}
}
