package pulsartest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Shared subscriptions go round-robin over consumers that have permits:
// two consumers with room for everything get one message in two each.
func TestSharedRoundRobin(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	for range 2 {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	wait.For(t, "both consumers to grant permits", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 2 && st[0].PermitsGranted > 0 && st[1].PermitsGranted > 0
	})
	const n = 20
	for i := range n {
		if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every message dispatched", func() bool {
		st := b.Consumers(topic, "s")
		return st[0].Dispatched+st[1].Dispatched == n
	})
	if st := b.Consumers(topic, "s"); st[0].Dispatched != n/2 || st[1].Dispatched != n/2 {
		t.Fatalf("dispatched %d and %d, want %d each", st[0].Dispatched, st[1].Dispatched, n/2)
	}
}

// Key-shared: a key whose entries a consumer still holds unacked goes to no
// other consumer after a join, even when the ring now assigns it to the
// newcomer; once they are acked the newcomer gets its keys and nothing is
// lost or doubled.
func TestKeySharedHoldAcrossJoin(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	const keys = 50
	publish := func(round int) {
		for k := range keys {
			if _, err := b.Publish(ctx, topic, Message{Key: fmt.Sprint("k", k), Payload: fmt.Appendf(nil, "%d/%d", k, round)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, ReceiverQueueSize: 1000}
	first, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	wait.For(t, "the first consumer to grant permits", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 1 && st[0].PermitsGranted > 0
	})
	publish(0)
	wait.For(t, "every key held by the first consumer", func() bool { return b.Consumers(topic, "s")[0].Dispatched == keys })
	second, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	wait.For(t, "the second consumer to grant permits", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 2 && st[1].PermitsGranted > 0
	})
	publish(1)
	wait.For(t, "the first consumer's keys to reach it", func() bool { return b.Consumers(topic, "s")[0].Dispatched > keys })
	time.Sleep(50 * time.Millisecond)
	if st := b.Consumers(topic, "s"); st[1].Dispatched != 0 {
		t.Fatalf("the joining consumer got %d messages of keys the first one still holds", st[1].Dispatched)
	}
	seen := map[string]int{}
	for range b.Consumers(topic, "s")[0].Dispatched {
		m := receive(t, ctx, first)
		seen[string(m.Payload())]++
		if err := first.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the held-back keys to reach the joining consumer", func() bool {
		st := b.Consumers(topic, "s")
		return st[0].Dispatched+st[1].Dispatched == 2*keys
	})
	for range b.Consumers(topic, "s")[1].Dispatched {
		m := receive(t, ctx, second)
		seen[string(m.Payload())]++
		_ = second.Ack(m)
	}
	if b.Consumers(topic, "s")[1].Dispatched == 0 {
		t.Fatal("no key moved to the joining consumer")
	}
	if len(seen) != 2*keys {
		t.Fatalf("received %d distinct messages, want %d", len(seen), 2*keys)
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s received %d times", p, n)
		}
	}
}

// Key-shared keeps a key's order when its parked entry does not fit yet: a
// batch of key k waiting in the redelivery list for enough permits holds
// back the later single message of k, even though that one would fit.
// (With StrictBatchPermits, where a batch needs permits for all its
// messages; a real broker sends it with any permit, see
// TestKeySharedBatchesCountEntries.)
func TestKeySharedParkedEntryKeepsKeyOrder(t *testing.T) {
	b := startBrokerWith(t, Options{StrictBatchPermits: true})
	ctx := ctxT(t)
	r := dialRaw(t, b)
	r.connect(20)
	rawSubscribe(r, "ks-order", "s", subKeyShared, 3, 9)
	flow := func(n uint64) {
		r.send(cmdFlow, func(o []byte) []byte {
			o = appendVarintField(o, 1, 3)
			return appendVarintField(o, 2, n)
		}, nil)
	}
	entryOf := func(f flat) uint64 {
		id, err := decodeMsgID(f.bs[2])
		if err != nil {
			t.Fatal(err)
		}
		return id.entry
	}
	// Eight messages of another key use up a grant of 8 (the consumer's
	// largest, so a batch of 3 is not oversized).
	for i := range 8 {
		if _, err := b.Publish(ctx, "ks-order", Message{Key: "x", Payload: fmt.Appendf(nil, "x%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	flow(8)
	for range 8 {
		r.expect(cmdMessage)
	}
	// Entry 8: a batch of 3 of key k; entry 9: one message of key k.
	if _, err := b.PublishBatch(ctx, "ks-order", Message{Key: "k", Payload: []byte("b0")}, Message{Key: "k", Payload: []byte("b1")}, Message{Key: "k", Payload: []byte("b2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, "ks-order", Message{Key: "k", Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	flow(1) // the batch does not fit: both entries are parked
	flow(1) // still not: the single message must keep waiting behind it
	wait.For(t, "both grants counted", func() bool { return b.Consumers("ks-order", "s")[0].PermitsGranted == 10 })
	_ = r.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var one [1]byte
	if n, _ := r.nc.Read(one[:]); n > 0 {
		t.Fatal("a later message of key k was pushed before its parked batch")
	}
	flow(1)
	f, _ := r.expect(cmdMessage)
	if e := entryOf(f); e != 8 {
		t.Fatalf("first message of key k is entry %d, want the batch (8)", e)
	}
	flow(1)
	f, _ = r.expect(cmdMessage)
	if e := entryOf(f); e != 9 {
		t.Fatalf("second message of key k is entry %d, want 9", e)
	}
}

// Failover: when a joining consumer takes a partition over, the entries the
// previous active consumer holds unacked are rewound to the new one.
func TestFailoverTakeoverRewindsUnacked(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	if err := b.CreateTopic(topic, 1); err != nil {
		t.Fatal(err)
	}
	part := PartitionTopic(topic, 0)
	opts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: name}
	}
	later, err := cl.Subscribe(opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	for i := range 3 {
		if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the first active consumer to get everything", func() bool {
		st := b.Consumers(part, "s")
		return len(st) == 1 && st[0].Dispatched == 3
	})
	// "a" sorts first, so it becomes active for partition 0.
	first, err := cl.Subscribe(opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	for i := range 3 {
		m := receive(t, ctx, first)
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("new active consumer got %q, want %d", m.Payload(), i)
		}
		_ = first.Ack(m)
	}
	wait.For(t, "the backlog to empty", func() bool { return b.Backlog(part, "s") == 0 })
	if st := b.Consumers(part, "s"); st[1].Redelivered != 3 || st[1].Name != "a" {
		t.Fatalf("want 3 redelivered to the new active consumer a, got %+v", st)
	}
}

// An exclusive subscription admits one consumer: a second subscribe is
// refused while the first is connected.
func TestExclusiveAdmitsOne(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	topic := uniqueTopic(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive}
	c, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if second, err := cl.Subscribe(opts); err == nil {
		second.Close()
		t.Fatal("a second consumer joined an exclusive subscription")
	}
	if st := b.Consumers(topic, "s"); len(st) != 1 {
		t.Fatalf("want the one exclusive consumer, got %+v", st)
	}
}

// A Shared subscription hands out a backlog in turns of 20 messages, as a
// real Pulsar 4.0 broker does (PersistentDispatcherMultipleConsumers,
// dispatcherMaxRoundRobinBatchSize 20): two consumers with room for
// everything, 100 messages waiting, get m-0..19, m-40..59 and m-80..99 (the
// first to subscribe) and m-20..39 and m-60..79 (the other), each in order.
func TestSharedDispatchesTurnsOfTwenty(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	b.StallDispatch(topic, true)
	publishN(t, b, topic, 100)
	var cs []pulsar.Consumer
	for range 2 {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
			ReceiverQueueSize: 1000, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	wait.For(t, "both consumers to grant permits", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 2 && st[0].PermitsGranted == 1000 && st[1].PermitsGranted == 1000
	})
	b.StallDispatch(topic, false)
	want := [2][]string{}
	for i := range 100 {
		turn := i / 20 % 2
		want[turn] = append(want[turn], fmt.Sprintf("m-%d", i))
	}
	for i, c := range cs {
		var got []string
		for range len(want[i]) {
			got = append(got, string(receive(t, ctx, c).Payload()))
		}
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("consumer %d received %v, want %v", i, got, want[i])
		}
	}
}

// On a Shared subscription every chunk of a message goes to the consumer
// that got its first chunk, as a real broker's chunk assignment does
// (PersistentDispatcherMultipleConsumers.sendChunkedMessagesToConsumers):
// with two consumers, every chunked message is reassembled whole, once.
func TestSharedChunksStayWithOneConsumer(t *testing.T) {
	b := startBrokerWith(t, Options{MaxMessageSize: 2048})
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	got := make(chan string, 100)
	for range 2 {
		// pulsar-client-go starts one sleeping goroutine per chunked
		// message for ExpireTimeOfIncompleteChunk: keep it short.
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
			ExpireTimeOfIncompleteChunk: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			for {
				m, err := c.Receive(ctx)
				if err != nil {
					return
				}
				got <- string(m.Payload())
				_ = c.Ack(m)
			}
		}()
	}
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, EnableChunking: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	want := map[string]int{}
	for i := range 6 {
		big := bytes.Repeat([]byte{byte('a' + i)}, 7000)
		want[string(big)] = 0
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: big}); err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		select {
		case p := <-got:
			if _, ok := want[p]; !ok {
				t.Fatalf("received %d bytes that were not sent whole", len(p))
			}
			want[p]++
		case <-ctx.Done():
			t.Fatalf("timed out: received %v of 6 messages (by first byte and count)", summary(want))
		}
	}
	for p, n := range want {
		if n != 1 {
			t.Errorf("message of %q received %d times", p[:1], n)
		}
	}
}

// summary shows how many times each message (named by its first byte) came.
func summary(m map[string]int) map[string]int {
	out := map[string]int{}
	for p, n := range m {
		out[p[:1]] = n
	}
	return out
}
