package pulsartest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// The key hash is 32-bit Murmur3 with seed 0, as Pulsar brokers compute it
// for key-shared routing (reference vectors).
func TestMurmur3Vectors(t *testing.T) {
	for in, want := range map[string]uint32{
		"":      0,
		"hello": 0x248bfa47,
		"The quick brown fox jumps over the lazy dog": 0x2e4ff723,
	} {
		if got := murmur3([]byte(in)); got != want {
			t.Errorf("murmur3(%q) = %#x, want %#x", in, got, want)
		}
	}
}

// Key-shared sticky mode: each key goes to the consumer whose hash range
// holds the key's hash.
func TestKeySharedStickyRanges(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	ranges := [][2]int{{0, 32767}, {32768, 65535}}
	var cs []pulsar.Consumer
	for _, r := range ranges {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared,
			KeySharedPolicy: &pulsar.KeySharedPolicy{Mode: pulsar.KeySharedPolicyModeSticky, HashRanges: []int{r[0], r[1]}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	const n = 40
	for i := range n {
		if _, err := b.Publish(ctx, topic, Message{Key: fmt.Sprint("key-", i), Payload: []byte("p")}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	total := 0
	all := reached(&mu, &total, n)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, ok := receiveUntil(ctx, c, all)
				if !ok {
					return
				}
				h := int(murmur3([]byte(m.Key())) % keyHashRange)
				if h < ranges[i][0] || h > ranges[i][1] {
					t.Errorf("key %s (hash %d) on consumer %d", m.Key(), h, i)
				}
				mu.Lock()
				total++
				mu.Unlock()
				_ = c.Ack(m)
			}
		}()
	}
	wg.Wait()
	if total != n {
		t.Fatalf("received %d of %d", total, n)
	}
}

// LZ4- and ZLIB-compressed batches pass through byte for byte: consumers
// decompress them, and Messages decodes them too.
func TestCompressedBatches(t *testing.T) {
	for _, ct := range []pulsar.CompressionType{pulsar.LZ4, pulsar.ZLib} {
		t.Run(fmt.Sprint(ct), func(t *testing.T) {
			b := startBroker(t)
			cl := newClient(t, b)
			ctx := ctxT(t)
			topic := uniqueTopic(t)
			c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, CompressionType: ct, BatchingMaxPublishDelay: time.Hour, SendTimeout: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			const n = 20
			for i := range n {
				prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("message number %d, repeated repeated repeated", i))}, nil)
			}
			if err := prod.FlushWithCtx(ctx); err != nil {
				t.Fatal(err)
			}
			stored := b.Messages(topic)
			if len(stored) != n {
				t.Fatalf("Messages decoded %d", len(stored))
			}
			for i := range n {
				want := fmt.Sprintf("message number %d, repeated repeated repeated", i)
				if string(stored[i].Payload) != want {
					t.Fatalf("stored %d: %q", i, stored[i].Payload)
				}
				m := receive(t, ctx, c)
				if string(m.Payload()) != want {
					t.Fatalf("received %d: %q", i, m.Payload())
				}
				_ = c.Ack(m)
			}
		})
	}
}

// With AckWithResponse the broker confirms each ack, so Ack returns only
// once the broker has recorded it.
func TestAckWithResponse(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(receive(t, ctx, c)); err != nil {
		t.Fatal(err)
	}
	if got := b.Backlog(topic, "s"); got != 0 {
		t.Fatalf("backlog %d right after a confirmed ack", got)
	}
}

// Key-shared keeps each key's order while a consumer joins mid-stream: a
// key moves to the new consumer only after the old one acked what it holds
// of that key, so the global receive order per key is the publish order.
func TestKeySharedOrderAcrossJoin(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	const keys, per = 30, 20
	for i := range per {
		for k := range keys {
			if _, err := b.Publish(ctx, topic, Message{Key: fmt.Sprint("k", k), Payload: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, ReceiverQueueSize: 5,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	}
	var mu sync.Mutex
	last := map[string]int{}
	total := 0
	all := reached(&mu, &total, keys*per)
	consume := func(c pulsar.Consumer, wg *sync.WaitGroup) {
		defer wg.Done()
		for {
			m, ok := receiveUntil(ctx, c, all)
			if !ok {
				return
			}
			var i int
			fmt.Sscan(string(m.Payload()), &i)
			time.Sleep(time.Millisecond) // slow processing keeps prefetched messages in flight
			mu.Lock()
			if prev, ok := last[m.Key()]; ok && i != prev+1 {
				t.Errorf("key %s: %d after %d", m.Key(), i, prev)
			}
			last[m.Key()] = i
			total++
			mu.Unlock()
			_ = c.Ack(m)
		}
	}
	var wg sync.WaitGroup
	first, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	wg.Add(1)
	go consume(first, &wg)
	wait.For(t, "first consumer under way", reached(&mu, &total, 40))
	second, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	wg.Add(1)
	go consume(second, &wg)
	wg.Wait()
	if total != keys*per {
		t.Fatalf("received %d of %d", total, keys*per)
	}
	if st := b.Consumers(topic, "s"); st[1].Dispatched == 0 {
		t.Fatalf("the joining consumer got nothing: %+v", st)
	}
}
