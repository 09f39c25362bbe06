package pulsartest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

type activeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *activeRecorder) BecameActive(_ pulsar.Consumer, topic string, partition int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "active")
}

func (r *activeRecorder) BecameInactive(_ pulsar.Consumer, topic string, partition int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "inactive")
}

func (r *activeRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return ""
	}
	return r.events[len(r.events)-1]
}

// Failover: the active consumer gets every message, the other is told it
// is passive; when the active one leaves, the other is told it became
// active and receives the unacked and the new messages. (On this topic
// name the broker's hash ring picks "a", which joins first.)
func TestFailoverTakeover(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := FullTopicName("failover-1")
	var ra, rb activeRecorder
	ca, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: "a", EventListener: &ra})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: "b", EventListener: &rb})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	wait.For(t, "active notices", func() bool { return ra.last() == "active" && rb.last() == "inactive" })
	for i := range 4 {
		if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	m := receive(t, ctx, ca)
	if string(m.Payload()) != "0" {
		t.Fatalf("a got %q", m.Payload())
	}
	if err := ca.AckWithTxn(m, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "ack", func() bool { return b.Backlog(topic, "s") == 3 })
	noMessage(t, cb, 50*time.Millisecond)
	st := b.Consumers(topic, "s")
	if !st[0].Active || st[1].Active || st[1].Dispatched != 0 {
		t.Fatalf("before takeover: %+v", st)
	}
	ca.Close()
	wait.For(t, "takeover notice", func() bool { return rb.last() == "active" })
	for _, want := range []string{"1", "2", "3"} {
		m := receive(t, ctx, cb)
		if string(m.Payload()) != want {
			t.Fatalf("b got %q, want %q", m.Payload(), want)
		}
		_ = cb.Ack(m)
	}
	st = b.Consumers(topic, "s")
	if st[0].Connected || !st[1].Active || st[0].SubType != "Failover" {
		t.Fatalf("after takeover: %+v", st)
	}
}

// Key-shared: every key is served by one consumer only, in publish order,
// and both consumers get keys. Which consumer owns a key depends on the
// consumers' names, which the client draws at random: with 64 keys, the
// chance that one consumer's 100 ring points own them all is negligible
// (about 2^-63 for an even split; with 8 keys it would be 1 in 128).
func TestKeySharedRoutesByKey(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	var cs []pulsar.Consumer
	for range 2 {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, ReceiverQueueSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	const keys, per = 64, 4
	for i := range per {
		for k := range keys {
			m := Message{Key: fmt.Sprint("k", k), Payload: []byte(fmt.Sprint(i))}
			if k%2 == 0 {
				m.OrderingKey = fmt.Sprint("o", k)
			}
			if _, err := b.Publish(ctx, topic, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	owner := map[string]int{}
	next := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	total := 0
	all := reached(&mu, &total, keys*per)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, ok := receiveUntil(ctx, c, all)
				if !ok {
					return
				}
				mu.Lock()
				if o, ok := owner[m.Key()]; ok && o != i {
					t.Errorf("key %s on consumers %d and %d", m.Key(), o, i)
				}
				owner[m.Key()] = i
				if string(m.Payload()) != fmt.Sprint(next[m.Key()]) {
					t.Errorf("key %s: got %q, want %d", m.Key(), m.Payload(), next[m.Key()])
				}
				next[m.Key()]++
				total++
				mu.Unlock()
				_ = c.Ack(m)
			}
		}()
	}
	wg.Wait()
	if total != keys*per {
		t.Fatalf("received %d of %d", total, keys*per)
	}
	used := map[int]bool{}
	for _, o := range owner {
		used[o] = true
	}
	if len(used) != 2 {
		t.Fatalf("keys not spread: %v", owner)
	}
}

// A cumulative ack acknowledges every message up to and including it.
func TestCumulativeAck(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 5 {
		if _, err := b.Publish(ctx, topic, Message{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var last pulsar.Message
	for range 3 {
		last = receive(t, ctx, c)
	}
	if err := c.AckCumulative(last); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "cumulative ack", func() bool { return b.Backlog(topic, "s") == 2 })
	if st := b.Consumers(topic, "s")[0]; st.Acked != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// With batch-index acks, acking some messages of a batch is recorded by the
// broker, and a redelivery of the batch carries only the unacked ones.
func TestBatchIndexAck(t *testing.T) {
	b := startBrokerWith(t, Options{BatchIndexAck: true})
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	var msgs []Message
	for i := range 4 {
		msgs = append(msgs, Message{Payload: []byte(fmt.Sprint(i))})
	}
	if _, err := b.PublishBatch(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
	opts := pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, EnableBatchIndexAcknowledgment: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	}
	c, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		m := receive(t, ctx, c)
		if i%2 == 0 {
			if err := c.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait.For(t, "partial batch ack", func() bool { return b.Backlog(topic, "s") == 2 })
	c.Close()
	c2, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for _, want := range []string{"1", "3"} {
		m := receive(t, ctx, c2)
		if string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
		_ = c2.Ack(m)
	}
	noMessage(t, c2, 50*time.Millisecond)
	wait.For(t, "batch fully acked", func() bool { return b.Backlog(topic, "s") == 0 })
	if st := b.Consumers(topic, "s"); st[0].Acked != 2 || st[1].Acked != 2 || st[1].Dispatched != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A nacked message comes back after the nack delay with its redelivery
// count raised; the broker counts the nack and the redelivery.
func TestNackRedeliveryCount(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, NackRedeliveryDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for want := uint32(0); want < 3; want++ {
		m := receive(t, ctx, c)
		if m.RedeliveryCount() != want {
			t.Fatalf("redelivery count %d, want %d", m.RedeliveryCount(), want)
		}
		if want < 2 {
			c.Nack(m)
		} else {
			_ = c.Ack(m)
		}
	}
	wait.For(t, "ack", func() bool { return b.Backlog(topic, "s") == 0 })
	st := b.Consumers(topic, "s")[0]
	if st.Nacked != 2 || st.Redelivered != 2 || st.Dispatched != 3 || st.Acked != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// pulsar-client-go's dead-letter policy: after MaxDeliveries the client
// moves the message to the DLQ topic (a producer on it, which creates the
// DLQ's initial subscription) and acks the original.
func TestDeadLetterPolicy(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	dlq := topic + "-dlq"
	c, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, NackRedeliveryDelay: 20 * time.Millisecond,
		DLQ: &pulsar.DLQPolicy{MaxDeliveries: 2, DeadLetterTopic: dlq, InitialSubscriptionName: "dead"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("poison"), Properties: map[string]string{"p": "1"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c.Nack(receive(t, ctx, c))
	}
	wait.For(t, "message on the DLQ", func() bool { return len(b.Messages(dlq)) == 1 })
	wait.For(t, "original acked", func() bool { return b.Backlog(topic, "s") == 0 })
	if got := b.Backlog(dlq, "dead"); got != 1 {
		t.Fatalf("DLQ initial subscription backlog %d", got)
	}
	m := b.Messages(dlq)[0]
	if string(m.Payload) != "poison" || m.Properties["p"] != "1" {
		t.Fatalf("DLQ message %+v", m)
	}
	noMessage(t, c, 50*time.Millisecond)
}

// pulsar-client-go's retry policy: ReconsumeLater publishes to the retry
// topic with a deliver-at time, and the broker holds it until then.
func TestRetryTopicDelayedDelivery(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, RetryEnable: true,
		DLQ: &pulsar.DLQPolicy{MaxDeliveries: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("later")}); err != nil {
		t.Fatal(err)
	}
	m := receive(t, ctx, c)
	const delay = 300 * time.Millisecond
	start := time.Now()
	c.ReconsumeLater(m, delay)
	m2 := receive(t, ctx, c)
	if string(m2.Payload()) != "later" || m2.Properties()["RECONSUMETIMES"] != "1" {
		t.Fatalf("retried message %q %v", m2.Payload(), m2.Properties())
	}
	if waited := time.Since(start); waited < delay-20*time.Millisecond {
		t.Fatalf("redelivered after %v, before the %v delay", waited, delay)
	}
	_ = c.Ack(m2)
	retry := topic + "-s-RETRY"
	stored := b.Messages(retry)
	if len(stored) != 1 || stored[0].DeliverAt.IsZero() || string(stored[0].Payload) != "later" {
		t.Fatalf("retry topic %+v", stored)
	}
}

// DeliverAfter on a shared subscription is held by the broker until due;
// exclusive subscriptions ignore the delay, as in Pulsar.
func TestDelayedDelivery(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	shared, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "shared", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	excl, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "excl", Type: pulsar.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	defer excl.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const delay = 300 * time.Millisecond
	start := time.Now()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("d"), DeliverAfter: delay}); err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, ctx, excl); string(m.Payload()) != "d" {
		t.Fatalf("exclusive got %q first", m.Payload())
	}
	if m := receive(t, ctx, shared); string(m.Payload()) != "now" {
		t.Fatalf("shared got %q first", m.Payload())
	}
	m := receive(t, ctx, shared)
	if string(m.Payload()) != "d" || time.Since(start) < delay-20*time.Millisecond {
		t.Fatalf("shared got %q after %v", m.Payload(), time.Since(start))
	}
}

// Guarantee: a message held for delayed delivery on a Shared subscription
// is delivered once after the subscription turns Failover (its Shared
// consumers leave, a Failover consumer subscribes): the Failover consumer
// gets it at once, as from a real broker, whose new single-active
// dispatcher rewinds the cursor and does not delay, and its delivery time
// passing later sends nothing more, even after a nack of another message
// rewound the subscription while the message was still held.
func TestDelayedMessageDeliveredOnceAfterSharedTurnsFailover(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	deliverAt := time.Now().Add(2 * time.Second)
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("delayed"), DeliverAt: deliverAt}, Message{Payload: []byte("m1")}); err != nil {
		t.Fatal(err)
	}
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true,
		NackRedeliveryDelay: 10 * time.Millisecond}
	shared, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The Shared dispatcher read past the delayed message to reach m1.
	if m := receive(t, ctx, shared); string(m.Payload()) != "m1" {
		t.Fatalf("shared consumer got %q, want m1 (the other message is delayed)", m.Payload())
	} else if err := shared.Ack(m); err != nil {
		t.Fatal(err)
	}
	shared.Close()
	opts.Type = pulsar.Failover
	fo, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("m2")}); err != nil {
		t.Fatal(err)
	}
	delayed := 0
	// untilM2 receives until m2 and counts the delayed message on the way,
	// acknowledging it if ack is set.
	untilM2 := func(ack bool) pulsar.Message {
		for {
			m := receive(t, ctx, fo)
			switch string(m.Payload()) {
			case "m2":
				return m
			case "delayed":
				delayed++
				if ack {
					if err := fo.Ack(m); err != nil {
						t.Fatal(err)
					}
				}
			default:
				t.Fatalf("failover consumer got %q", m.Payload())
			}
		}
	}
	// Nack m2: on a Failover subscription that rewinds it, and every
	// unacknowledged message comes back. A delayed message that came before
	// is acknowledged by then; one that comes only now is kept unacked.
	fo.Nack(untilM2(true))
	if err := fo.Ack(untilM2(false)); err != nil {
		t.Fatal(err)
	}
	// Its delivery time passes: nothing is sent again.
	noMessage(t, fo, time.Until(deliverAt)+time.Second)
	if delayed != 1 {
		t.Fatalf("the delayed message was delivered %d times, want once", delayed)
	}
}

// On a partitioned topic each partition elects its own failover consumer
// (partition i → i-th consumer by name), so two consumers each become
// active for one partition and are told so.
func TestFailoverPartitioned(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	topic := uniqueTopic(t)
	if err := b.CreateTopic(topic, 2); err != nil {
		t.Fatal(err)
	}
	var recs [2]activeRecorder
	for i, name := range []string{"a", "b"} {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: name, EventListener: &recs[i]})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for p := range 2 {
		wait.For(t, "one active consumer per partition", func() bool {
			st := b.Consumers(PartitionTopic(topic, p), "s")
			active := 0
			for _, s := range st {
				if s.Active {
					active++
					if s.Name != []string{"a", "b"}[p] {
						return false
					}
				}
			}
			return active == 1
		})
	}
	for i := range recs {
		wait.For(t, "active notice", func() bool {
			recs[i].mu.Lock()
			defer recs[i].mu.Unlock()
			for _, e := range recs[i].events {
				if e == "active" {
					return true
				}
			}
			return false
		})
	}
}

// A batch larger than the consumer's whole permit budget is still
// delivered (sent once any permit is available), so it cannot wedge the
// subscription.
func TestOversizedBatchDelivered(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	var msgs []Message
	for i := range 30 {
		msgs = append(msgs, Message{Payload: []byte(fmt.Sprint(i))})
	}
	for range 2 {
		if _, err := b.PublishBatch(ctx, topic, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 10, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 60 {
		m := receive(t, ctx, c)
		if string(m.Payload()) != fmt.Sprint(i%30) {
			t.Fatalf("message %d: %q", i, m.Payload())
		}
		_ = c.Ack(m)
	}
	wait.For(t, "drained", func() bool { return b.Backlog(topic, "s") == 0 })
}

// Messages above the announced maximum size are chunked by the producer,
// stored chunk by chunk and reassembled by the consumer.
func TestChunkedMessage(t *testing.T) {
	b, err := Start(context.Background(), Options{MaxMessageSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	// pulsar-client-go starts one sleeping goroutine per chunked message
	// that lives for ExpireTimeOfIncompleteChunk even after the message is
	// complete; keep it short so it is gone when goleak looks.
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ExpireTimeOfIncompleteChunk: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, EnableChunking: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	big := make([]byte, 7000)
	for i := range big {
		big[i] = byte(i)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: big, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	m := receive(t, ctx, c)
	if string(m.Payload()) != string(big) || m.Key() != "k" {
		t.Fatalf("reassembled %d bytes, key %q", len(m.Payload()), m.Key())
	}
	if n := len(b.Messages(topic)); n < 4 {
		t.Fatalf("stored %d entries, want one per chunk", n)
	}
	_ = c.Ack(m)
	wait.For(t, "all chunks acked", func() bool { return b.Backlog(topic, "s") == 0 })
}

// Without Options.BatchIndexAck (the default, as in Pulsar 4.0, where
// acknowledgmentAtBatchIndexLevelEnabled is off) the broker ignores an ack
// that carries an ack_set: a partly acknowledged batch stays whole in the
// backlog and comes back whole to the next consumer.
func TestBatchIndexAckOffByDefault(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	var msgs []Message
	for i := range 4 {
		msgs = append(msgs, Message{Payload: []byte(fmt.Sprint(i))})
	}
	if _, err := b.PublishBatch(ctx, topic, msgs...); err != nil {
		t.Fatal(err)
	}
	opts := pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, EnableBatchIndexAcknowledgment: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true,
	}
	c, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		m := receive(t, ctx, c)
		if i%2 == 0 {
			if err := c.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := b.Backlog(topic, "s"); n != 4 {
		t.Fatalf("backlog %d after acking 2 of a batch of 4, want 4 (partial acks ignored)", n)
	}
	c.Close()
	c2, err := cl.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for _, want := range []string{"0", "1", "2", "3"} {
		m := receive(t, ctx, c2)
		if string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
		_ = c2.Ack(m)
	}
	wait.For(t, "batch fully acked", func() bool { return b.Backlog(topic, "s") == 0 })
}
