package pulsartest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Produce N unbatched, consume N, ack: nothing lost, order kept, acks seen.
func TestProduceConsumeUnbatched(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 50
	for i := range n {
		id, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i)), Key: fmt.Sprint("k", i), Properties: map[string]string{"i": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if id.EntryID() != int64(i) {
			t.Fatalf("receipt entry %d, want %d", id.EntryID(), i)
		}
	}
	for i := range n {
		m := receive(t, ctx, cons)
		if string(m.Payload()) != fmt.Sprint(i) || m.Key() != fmt.Sprint("k", i) || m.Properties()["i"] != fmt.Sprint(i) {
			t.Fatalf("message %d: payload %q key %q props %v", i, m.Payload(), m.Key(), m.Properties())
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "acks", func() bool { return b.Backlog(topic, "s") == 0 })
	st := b.Consumers(topic, "s")
	if len(st) != 1 || st[0].Dispatched != n || st[0].Acked != n || !st[0].Active || !st[0].Connected {
		t.Fatalf("stats %+v", st)
	}
	if got := len(b.Messages(topic)); got != n {
		t.Fatalf("Messages: %d, want %d", got, n)
	}
}

// A batching producer's entries are stored byte for byte and redelivered as
// sent: the client unbatches them, ids carry batch indexes, and the broker
// charges and counts one permit per message of the batch.
func TestProduceConsumeBatched(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Hour, SendTimeout: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 30
	done := make(chan error, n)
	for i := range n {
		prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i)), Properties: map[string]string{"i": fmt.Sprint(i)}},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { done <- err })
	}
	if err := prod.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	stored := b.Messages(topic)
	if len(stored) != n {
		t.Fatalf("stored %d messages, want %d", len(stored), n)
	}
	for i, m := range stored {
		if string(m.Payload) != fmt.Sprint(i) || m.Properties["i"] != fmt.Sprint(i) || m.ID.BatchIndex != int32(i%10) || m.ID.EntryID != uint64(i/10) {
			t.Fatalf("stored %d: %q %v %+v", i, m.Payload, m.Properties, m.ID)
		}
	}
	for i := range n {
		m := receive(t, ctx, cons)
		if string(m.Payload()) != fmt.Sprint(i) || m.ID().BatchIdx() != int32(i%10) || m.ID().EntryID() != int64(i/10) {
			t.Fatalf("received %d: %q %v", i, m.Payload(), m.ID())
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "backlog drained", func() bool { return b.Backlog(topic, "s") == 0 })
	st := b.Consumers(topic, "s")[0]
	if st.Dispatched != n || st.Acked != n || st.PermitsGranted-st.Available != n {
		t.Fatalf("stats %+v", st)
	}
}

// The broker never pushes more messages than the consumer granted, counting
// a batch entry as its number of messages, and resumes when the client
// grants more: always for unbatched entries, and for batches with
// Options.StrictBatchPermits (a real broker overshoots with batches, see
// TestBatchPermitsOvershootLikeABroker).
func TestFlowPermitsBoundDispatch(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprint("batched=", batched), func(t *testing.T) {
			b := startBrokerWith(t, Options{StrictBatchPermits: batched})
			cl := newClient(t, b)
			ctx := ctxT(t)
			topic := uniqueTopic(t)
			const queue, n = 10, 60
			for i := 0; i < n; i += 3 {
				var msgs []Message
				for j := i; j < i+3; j++ {
					msgs = append(msgs, Message{Payload: []byte(fmt.Sprint(j))})
				}
				var err error
				if batched {
					_, err = b.PublishBatch(ctx, topic, msgs...)
				} else {
					_, err = b.Publish(ctx, topic, msgs...)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			cons, err := cl.Subscribe(pulsar.ConsumerOptions{
				Topic: topic, SubscriptionName: "s", ReceiverQueueSize: queue,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			// pulsar-client-go prefetches its receiver queue plus its
			// internal message channel (10), granting permits as messages
			// move between the two; the broker must stop when they run out.
			wait.For(t, "read-ahead to fill", func() bool {
				st := b.Consumers(topic, "s")
				return len(st) == 1 && st[0].Available < 3 && st[0].Dispatched >= queue
			})
			time.Sleep(50 * time.Millisecond)
			st := b.Consumers(topic, "s")[0]
			if st.Flows[0] != queue || st.Dispatched > st.PermitsGranted || st.Dispatched >= n || st.Available < 0 || st.MaxAvailable > queue {
				t.Fatalf("before receiving: %+v", st)
			}
			for i := range n {
				m := receive(t, ctx, cons)
				if string(m.Payload()) != fmt.Sprint(i) {
					t.Fatalf("message %d: %q", i, m.Payload())
				}
				st := b.Consumers(topic, "s")[0]
				if st.Dispatched > st.PermitsGranted || st.Available < 0 || st.MaxAvailable > queue {
					t.Fatalf("after %d: dispatched beyond permits: %+v", i, st)
				}
				_ = cons.Ack(m)
			}
			st = b.Consumers(topic, "s")[0]
			if len(st.Flows) < 2 || st.Dispatched != n {
				t.Fatalf("after receiving: %+v", st)
			}
			var sum int64
			for _, f := range st.Flows {
				sum += int64(f)
			}
			if sum != st.PermitsGranted {
				t.Fatalf("PermitsGranted %d, sum of flows %d", st.PermitsGranted, sum)
			}
		})
	}
}

// A shared subscription spreads messages over its consumers, each message
// to exactly one of them.
func TestSharedSpreadsWithoutLossOrDuplicates(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	var cs []pulsar.Consumer
	for range 2 {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	const n = 100
	for i := range n {
		if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	per := make([]int, 2)
	for len(seen) < n {
		got := false
		for i, c := range cs {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			m, err := c.Receive(rctx)
			cancel()
			if err != nil {
				continue
			}
			got = true
			seen[string(m.Payload())]++
			per[i]++
			_ = c.Ack(m)
		}
		if !got && ctx.Err() != nil {
			t.Fatalf("timed out with %d of %d", len(seen), n)
		}
	}
	for k, v := range seen {
		if v != 1 {
			t.Fatalf("message %s received %d times", k, v)
		}
	}
	if per[0] == 0 || per[1] == 0 {
		t.Fatalf("not spread: %v", per)
	}
	wait.For(t, "backlog drained", func() bool { return b.Backlog(topic, "s") == 0 })
	for _, st := range b.Consumers(topic, "s") {
		if st.MaxAvailable > 5 || st.SubType != "Shared" {
			t.Fatalf("stats %+v", st)
		}
	}
}

// A new subscription starts at the end of the topic by default and at its
// start with the earliest initial position.
func TestInitialPosition(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	latest, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	defer latest.Close()
	earliest, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "earliest", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer earliest.Close()
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, ctx, latest); string(m.Payload()) != "new" {
		t.Fatalf("latest got %q", m.Payload())
	}
	if m := receive(t, ctx, earliest); string(m.Payload()) != "old" {
		t.Fatalf("earliest got %q", m.Payload())
	}
	if m := receive(t, ctx, earliest); string(m.Payload()) != "new" {
		t.Fatalf("earliest got %q", m.Payload())
	}
}
