package pulsartest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// publishN stores n messages "m-<i>" on topic.
func publishN(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	for i := range n {
		if _, err := b.Publish(ctxT(t), topic, Message{Payload: fmt.Appendf(nil, "m-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// On Exclusive and Failover subscriptions a nack does not redeliver the
// message named: as a real broker does (ServerCnx.handleRedeliverUnacknowledged
// redelivers individual messages only for Shared and Key_Shared; for the
// others PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages
// rewinds the cursor), every unacknowledged message comes back, in order,
// and redelivery counts stay 0 (the redelivery tracker is disabled there).
func TestSingleActiveRedeliveryRewinds(t *testing.T) {
	for name, typ := range map[string]pulsar.SubscriptionType{"exclusive": pulsar.Exclusive, "failover": pulsar.Failover} {
		t.Run(name, func(t *testing.T) {
			b := startBroker(t)
			cl := newClient(t, b)
			ctx := ctxT(t)
			topic := uniqueTopic(t)
			publishN(t, b, topic, 5)
			c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: typ,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
				NackRedeliveryDelay:         50 * time.Millisecond, AckWithResponse: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var first []pulsar.Message
			for range 5 {
				first = append(first, receive(t, ctx, c))
			}
			for _, m := range first[:2] {
				if err := c.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
			c.Nack(first[2]) // m-3 and m-4 are in flight, unacknowledged
			for i := 2; i < 5; i++ {
				m := receive(t, ctx, c)
				if want := fmt.Sprintf("m-%d", i); string(m.Payload()) != want || m.RedeliveryCount() != 0 {
					t.Fatalf("after the nack got %q with redelivery count %d, want %s with 0", m.Payload(), m.RedeliveryCount(), want)
				}
				if err := c.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
			wait.For(t, "the backlog to empty", func() bool { return b.Backlog(topic, "s") == 0 })
			noMessage(t, c, 50*time.Millisecond)
			st := b.Consumers(topic, "s")[0]
			if st.Nacked != 1 || st.Redelivered != 3 || st.Dispatched != 8 {
				t.Fatalf("stats %+v, want 1 nacked, 3 redelivered, 8 dispatched", st)
			}
		})
	}
}

// On a Shared subscription redelivery counts rise with each redelivery
// request and are forgotten when the last consumer leaves, as a real broker
// does (PersistentDispatcherMultipleConsumers.removeConsumer clears its
// redelivery tracker): the next consumer gets the message with count 0.
// While another consumer stays, the count is kept.
func TestSharedRedeliveryCountsClearedWithLastConsumer(t *testing.T) {
	for _, stays := range []bool{false, true} {
		t.Run(fmt.Sprintf("another consumer stays=%t", stays), func(t *testing.T) {
			b := startBroker(t)
			cl := newClient(t, b)
			ctx := ctxT(t)
			topic := uniqueTopic(t)
			opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 20 * time.Millisecond}
			first, err := cl.Subscribe(opts)
			if err != nil {
				t.Fatal(err)
			}
			publishN(t, b, topic, 1)
			for want := uint32(0); want < 3; want++ {
				m := receive(t, ctx, first)
				if m.RedeliveryCount() != want {
					t.Fatalf("redelivery count %d, want %d", m.RedeliveryCount(), want)
				}
				if want < 2 {
					first.Nack(m)
				}
			}
			var next pulsar.Consumer
			if stays {
				// The second consumer joins before the first leaves.
				if next, err = cl.Subscribe(opts); err != nil {
					t.Fatal(err)
				}
			}
			first.Close() // with the message unacknowledged
			if !stays {
				if next, err = cl.Subscribe(opts); err != nil {
					t.Fatal(err)
				}
			}
			defer next.Close()
			m := receive(t, ctx, next)
			want := uint32(0)
			if stays {
				want = 2
			}
			if m.RedeliveryCount() != want {
				t.Fatalf("after the first consumer left, redelivery count %d, want %d", m.RedeliveryCount(), want)
			}
		})
	}
}

// The active consumer of a non-partitioned failover topic is picked as
// Pulsar 4.0 does (AbstractDispatcherSingleActiveConsumer): a hash ring of
// consumer names against the topic name, not the first to join. For
// "failover-0" the ring picks "b" over "a", whichever joins first; with two
// consumers of the same name, the later joiner wins.
func TestFailoverActiveByHashRing(t *testing.T) {
	cases := []struct {
		name   string
		topic  string
		joins  []string
		active int // index in joins
	}{
		{"ring picks the second joiner", "failover-0", []string{"a", "b"}, 1},
		{"ring picks the first joiner", "failover-1", []string{"a", "b"}, 0},
		{"ring ignores join order", "failover-0", []string{"b", "a"}, 0},
		{"identical names: the later joiner", "failover-0", []string{"same", "same"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t)
			cl := newClient(t, b)
			ctx := ctxT(t)
			topic := FullTopicName(tc.topic)
			var cs []pulsar.Consumer
			for _, n := range tc.joins {
				c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: n})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				cs = append(cs, c)
			}
			publishN(t, b, topic, 1)
			m := receive(t, ctx, cs[tc.active])
			_ = cs[tc.active].Ack(m)
			st := b.Consumers(topic, "s")
			for i, c := range st {
				if c.Active != (i == tc.active) {
					t.Fatalf("consumer %d (%s) active=%t, want consumer %d active: %+v", i, c.Name, c.Active, tc.active, st)
				}
			}
		})
	}
}

// Unload closes every consumer and producer of a topic from the broker's
// side, as a real broker unloading the topic does (CLOSE_CONSUMER,
// CLOSE_PRODUCER): pulsar-client-go reconnects its consumer, the
// unacknowledged messages come back without a raised redelivery count, and
// nothing is lost. (The producer's side is checked on the raw protocol:
// pulsar-client-go (v0.21.0) races with itself when a producer reconnects
// while it sends.)
func TestUnloadReconnectsClients(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	publishN(t, b, topic, 4)
	for i := range 4 {
		m := receive(t, ctx, c)
		if i < 2 {
			if err := c.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := dialRaw(t, b)
	r.connect(20)
	rawProducer(r, topic)
	if err := b.Unload(topic); err != nil {
		t.Fatal(err)
	}
	if f, _ := r.expect(cmdCloseProducer); f.u[1] != 1 {
		t.Fatalf("CLOSE_PRODUCER %+v, want producer 1", f)
	}
	wait.For(t, "the consumer to reconnect", func() bool {
		st := b.Consumers(topic, "s")
		return len(st) == 2 && !st[0].Connected && st[1].Connected
	})
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("m-4")}); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	for len(got) < 3 {
		m := receive(t, ctx, c)
		got[string(m.Payload())] = m.RedeliveryCount()
		if err := c.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"m-2", "m-3", "m-4"} {
		if n, ok := got[k]; !ok || n != 0 {
			t.Fatalf("after the unload got %v, want m-2, m-3 (unacked) and m-4 with redelivery count 0", got)
		}
	}
	wait.For(t, "the backlog to empty", func() bool { return b.Backlog(topic, "s") == 0 })
}

// On Key_Shared, entries without an ordering or partition key in their
// metadata, batched or not, hash as "NONE_KEY", as a real broker's
// Commands.peekStickyKey does (it never looks into a batch's messages):
// with sticky ranges they all go to the consumer whose range holds
// murmur3("NONE_KEY") mod 65536.
func TestKeylessEntriesHashAsNoneKey(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	ctx := ctxT(t)
	topic := uniqueTopic(t)
	h := int(murmur3([]byte("NONE_KEY")) % keyHashRange)
	if h == 0 {
		t.Fatal("NONE_KEY hashes to 0: the ranges below cannot tell it from an empty key")
	}
	sub := func(lo, hi int) pulsar.Consumer {
		p, err := pulsar.NewKeySharedPolicySticky([]int{lo, hi})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared,
			KeySharedPolicy: p, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	_ = sub(0, h-1) // holds the hash of an empty key, 0
	owner := sub(h, keyHashRange-1)
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("plain")}); err != nil {
		t.Fatal(err)
	}
	// A client batch whose first message has no key carries no key in its
	// metadata, whatever its other messages' keys.
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 2, BatchingMaxPublishDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, key := range []string{"", "k"} {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("batched-" + key), Key: key}, func(pulsar.MessageID, *pulsar.ProducerMessage, error) {})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m := receive(t, ctx, owner)
		_ = owner.Ack(m)
	}
	st := b.Consumers(topic, "s")
	if st[0].Dispatched != 0 || st[1].Dispatched != 3 {
		t.Fatalf("keyless entries went to %d / %d messages, want all 3 to the NONE_KEY range's owner", st[0].Dispatched, st[1].Dispatched)
	}
}

// A Key_Shared consumer whose sticky hash ranges overlap a connected
// consumer's is refused with ConsumerAssignError ("Range conflict"), as a
// real broker does (HashRangeExclusiveStickyKeyConsumerSelector); one with
// disjoint ranges is admitted.
func TestStickyRangeConflictRefused(t *testing.T) {
	b := startBroker(t)
	cl := newClient(t, b)
	topic := uniqueTopic(t)
	sub := func(lo, hi int) (pulsar.Consumer, error) {
		p, err := pulsar.NewKeySharedPolicySticky([]int{lo, hi})
		if err != nil {
			t.Fatal(err)
		}
		return cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, KeySharedPolicy: p})
	}
	first, err := sub(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if c, err := sub(1000, 2000); err == nil {
		c.Close()
		t.Fatal("a consumer with an overlapping range was admitted")
	} else if !strings.Contains(err.Error(), "Range conflict") {
		t.Fatalf("refusal %v does not say Range conflict", err)
	}
	second, err := sub(1001, 2000)
	if err != nil {
		t.Fatalf("a consumer with a disjoint range was refused: %v", err)
	}
	second.Close()
}

// A cumulative ack on a Shared subscription is ignored, as a real broker
// ignores it (Consumer.messageAcked); on Exclusive it acknowledges every
// message up to the one named. (pulsar-client-go refuses to send one on
// Shared, so the raw protocol is used.)
func TestCumulativeAckIgnoredOnShared(t *testing.T) {
	for name, typ := range map[string]int{"shared": subShared, "exclusive": subExclusive} {
		t.Run(name, func(t *testing.T) {
			b := startBroker(t)
			topic := FullTopicName("cumulative")
			r := publishedConsumer(t, b, topic, typ, 3)
			r.send(cmdFlow, func(o []byte) []byte {
				o = appendVarintField(o, 1, 1)
				return appendVarintField(o, 2, 10)
			}, nil)
			for range 3 {
				r.expect(cmdMessage)
			}
			last := b.Messages(topic)[2].ID
			r.send(cmdAck, func(o []byte) []byte {
				o = appendVarintField(o, 1, 1)
				o = appendVarintField(o, 2, 1) // cumulative
				return appendMsgID(o, 3, msgID{ledger: last.LedgerID, entry: last.EntryID, partition: -1, batchIndex: -1})
			}, nil)
			r.send(cmdPing, nil, nil)
			r.expect(cmdPong) // the ack before it has been handled
			want := map[int]int64{subShared: 3, subExclusive: 0}[typ]
			if n := b.Backlog(topic, "s"); n != want {
				t.Fatalf("backlog %d after a cumulative ack of the last message, want %d", n, want)
			}
		})
	}
}

// With batches a real broker overshoots the permits: while a consumer has
// permits it reads up to min(permits, 100) entries and sends them all, each
// costing its messages (PersistentDispatcherSingleActiveConsumer,
// dispatcherMaxReadBatchSize). 20 batches of 30 messages to a consumer that
// granted 100 permits: all 600 are dispatched and its permits go to -500.
// With unbatched entries the permits are never exceeded.
func TestBatchPermitsOvershootLikeABroker(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("overshoot")
	for i := range 20 {
		msgs := make([]Message, 30)
		for j := range msgs {
			msgs[j] = Message{Payload: fmt.Appendf(nil, "b%d-%d", i, j)}
		}
		if _, err := b.PublishBatch(ctxT(t), topic, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	r := dialRaw(t, b)
	r.connect(20)
	rawSubscribe(r, topic, "s", subExclusive, 1, 1)
	r.send(cmdFlow, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendVarintField(o, 2, 100)
	}, nil)
	for range 20 {
		r.expect(cmdMessage)
	}
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong) // nothing more was sent before the pong
	st := b.Consumers(topic, "s")[0]
	if st.Dispatched != 600 || st.Available != -500 {
		t.Fatalf("dispatched %d, available %d; want all 600 batched messages and -500", st.Dispatched, st.Available)
	}
	// Nothing goes out while the permits are negative; once they are back
	// above zero, unbatched entries go out one permit each.
	publishN(t, b, topic, 150)
	r.send(cmdFlow, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendVarintField(o, 2, 510)
	}, nil)
	for range 10 {
		r.expect(cmdMessage)
	}
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong)
	if st := b.Consumers(topic, "s")[0]; st.Dispatched != 610 || st.Available != 0 {
		t.Fatalf("dispatched %d, available %d after 510 more permits; want 610 and 0", st.Dispatched, st.Available)
	}
}

// rawFlow grants consumer id n permits on r.
func rawFlow(r *rawConn, id, n uint64) {
	r.send(cmdFlow, func(o []byte) []byte {
		o = appendVarintField(o, 1, id)
		return appendVarintField(o, 2, n)
	}, nil)
}

// publishBatches stores n batches of size messages each on topic, every
// message keyed key.
func publishBatches(t *testing.T, b *Broker, topic, key string, n, size int) {
	t.Helper()
	for i := range n {
		msgs := make([]Message, size)
		for j := range msgs {
			msgs[j] = Message{Key: key, Payload: fmt.Appendf(nil, "b%d-%d", i, j)}
		}
		if _, err := b.PublishBatch(ctxT(t), topic, msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

// publishedConsumer stores n unbatched messages on topic and subscribes
// raw consumer 1 of type typ to it from the earliest position.
func publishedConsumer(t *testing.T, b *Broker, topic string, typ, n int) *rawConn {
	t.Helper()
	publishN(t, b, topic, n)
	r := connectedRaw(t, b)
	rawSubscribe(r, topic, "s", typ, 1, 1)
	return r
}

// batchedConsumer stores 5 batches of 30 messages of key k on topic and
// subscribes raw consumer 1 of type typ to it from the earliest position.
func batchedConsumer(t *testing.T, b *Broker, topic string, typ int) *rawConn {
	t.Helper()
	publishBatches(t, b, topic, "k", 5, 30)
	r := connectedRaw(t, b)
	rawSubscribe(r, topic, "s", typ, 1, 1)
	return r
}

// quiet returns once the broker answered a PING: nothing it pushed before
// is still unread by then.
func (r *rawConn) quiet() {
	r.t.Helper()
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong)
}

// wantPushed fails unless topic's only consumer of "s" was pushed
// dispatched messages and has available permits left.
func wantPushed(t *testing.T, b *Broker, topic string, dispatched, available int64) {
	t.Helper()
	if st := b.Consumers(topic, "s")[0]; st.Dispatched != dispatched || st.Available != available {
		t.Fatalf("dispatched %d, available %d; want %d and %d", st.Dispatched, st.Available, dispatched, available)
	}
}

// On a Shared subscription a real broker overshoots by at most one batch
// per turn (PersistentDispatcherMultipleConsumers.trySendMessagesToConsumers:
// a turn is max(min(permits, 20) / batch size, 1) entries, and a consumer
// whose permits are gone gets no further turn): 5 batches of 30 messages
// to a consumer that granted 10 permits send one batch, and its permits go
// to -20; the next batch waits until refills bring them above zero.
func TestSharedBatchOneEntryPerTurn(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("shared-batches")
	r := batchedConsumer(t, b, topic, subShared)
	rawFlow(r, 1, 10)
	r.expect(cmdMessage)
	r.quiet()
	wantPushed(t, b, topic, 30, -20)
	rawFlow(r, 1, 20) // back to 0: still nothing
	r.quiet()
	rawFlow(r, 1, 1)
	r.expect(cmdMessage)
	r.quiet()
	wantPushed(t, b, topic, 60, -29)
}

// On Key_Shared a real Pulsar 4.0 broker counts a consumer's permits in
// entries for each read (PersistentStickyKeyDispatcherMultipleConsumers
// .filterAndGroupEntriesForDispatching), and charges the messages it
// sends: 5 batches of 30 messages of one key to a consumer that granted 10
// permits are all sent (150 messages, permits -140), and nothing more
// until the permits are above zero again.
func TestKeySharedBatchesCountEntries(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("ks-batches")
	r := batchedConsumer(t, b, topic, subKeyShared)
	rawFlow(r, 1, 10)
	for range 5 {
		r.expect(cmdMessage)
	}
	r.quiet()
	wantPushed(t, b, topic, 150, -140)
	publishN(t, b, topic, 1)
	rawFlow(r, 1, 140) // back to 0: the new message waits
	r.quiet()
	rawFlow(r, 1, 1)
	r.expect(cmdMessage)
}

// rawAck acknowledges entry of ledger on consumer 1 of r, individually.
func rawAck(r *rawConn, ledger, entry uint64) {
	r.send(cmdAck, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		o = appendVarintField(o, 2, 0) // individual
		return appendMsgID(o, 3, msgID{ledger: ledger, entry: entry, partition: -1, batchIndex: -1})
	}, nil)
}

// A Shared consumer that holds MaxUnackedPerConsumer unacknowledged
// messages gets nothing more, whatever its permits, until its acks bring
// them down to half the limit, as a real broker blocks it
// (maxUnackedMessagesPerConsumer, Consumer.updateBlockedConsumerOnUnackedMsgs);
// a redelivery of everything it holds unblocks it.
func TestUnackedLimitBlocksConsumer(t *testing.T) {
	b := startBrokerWith(t, Options{MaxUnackedPerConsumer: 10})
	topic := FullTopicName("unacked-limit")
	publishN(t, b, topic, 40)
	r := dialRaw(t, b)
	r.connect(20)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	rawFlow(r, 1, 100)
	var ids []msgID
	take := func(n int) {
		t.Helper()
		for range n {
			f, _ := r.expect(cmdMessage)
			id, err := decodeMsgID(f.bs[2])
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		r.quiet()
	}
	take(10) // blocked at 10 unacked, with 90 permits left
	wantPushed(t, b, topic, 10, 90)
	for _, id := range ids[:4] {
		rawAck(r, id.ledger, id.entry)
	}
	r.quiet() // 6 unacked: still above half the limit
	wantPushed(t, b, topic, 10, 90)
	rawAck(r, ids[4].ledger, ids[4].entry)
	take(5) // 5 unacked: unblocked, and blocked again at 10
	wantPushed(t, b, topic, 15, 85)
	r.send(cmdRedeliver, func(o []byte) []byte { return appendVarintField(o, 1, 1) }, nil)
	take(10) // the 10 held come back first, and block it again
	wantPushed(t, b, topic, 25, 75)
}

// A non-persistent topic keeps nothing for its consumers, as a real
// broker's NonPersistentDispatcher: a message published while the consumer
// has no permits is dropped, a message a consumer nacks or leaves unacked
// when it closes is never redelivered, and a new subscription gets only
// what is published after it.
func TestNonPersistentDropsAndNeverRedelivers(t *testing.T) {
	b := startBroker(t)
	topic := "non-persistent://public/default/np"
	if _, err := b.Publish(ctxT(t), topic, Message{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, b)
	r.connect(20)
	rawSubscribe(r, topic, "s", subShared, 1, 1) // earliest: still nothing from before
	publishN(t, b, topic, 1)                     // m-0: no permits yet, dropped
	r.send(cmdFlow, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendVarintField(o, 2, 1)
	}, nil)
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong) // the permit has arrived
	if _, err := b.Publish(ctxT(t), topic, Message{Payload: []byte("sent")}); err != nil {
		t.Fatal(err)
	}
	_, p := r.expect(cmdMessage)
	if _, payload, err := splitPayloadSection(p); err != nil || string(payload) != "sent" {
		t.Fatalf("got %q (%v), want the message published with a permit", payload, err)
	}
	r.send(cmdFlow, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendVarintField(o, 2, 10)
	}, nil)
	r.send(cmdRedeliver, func(o []byte) []byte { return appendVarintField(o, 1, 1) }, nil)
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong) // no redelivery came before it
	if n := b.Backlog(topic, "s"); n != 0 {
		t.Fatalf("backlog %d on a non-persistent topic, want 0", n)
	}
	st := b.Consumers(topic, "s")[0]
	if st.Dispatched != 1 || st.Redelivered != 0 {
		t.Fatalf("stats %+v, want 1 dispatched and nothing redelivered", st)
	}
}

// A failover consumer's first ACTIVE_CONSUMER_CHANGE is sent while it
// subscribes, before the SUCCESS response, as a real broker sends it
// (AbstractDispatcherSingleActiveConsumer.addConsumer runs before
// ServerCnx answers). pulsar-client-go registers its consumer before it
// sends SUBSCRIBE (since v0.20.0), so its listener hears that first notice
// as well as the later changes.
func TestFirstActiveNoticeBeforeSubscribeSuccess(t *testing.T) {
	t.Run("raw order", func(t *testing.T) {
		b := startBroker(t)
		r := dialRaw(t, b)
		r.connect(20)
		r.send(cmdSubscribe, func(o []byte) []byte {
			o = appendStringField(o, 1, FullTopicName("notice"))
			o = appendStringField(o, 2, "s")
			o = appendVarintField(o, 3, subFailover)
			o = appendVarintField(o, 4, 1)
			return appendVarintField(o, 5, 7)
		}, nil)
		if f, _ := r.expect(cmdActiveConsumerChange); f.u[1] != 1 {
			t.Fatalf("notice %+v, want one for consumer 1 first", f)
		}
		if f, _ := r.expect(cmdSuccess); f.u[1] != 7 {
			t.Fatalf("success %+v", f)
		}
	})
	t.Run("pulsar-client-go hears the first notice and the later changes", func(t *testing.T) {
		b := startBroker(t)
		cl := newClient(t, b)
		topic := FullTopicName("failover-1") // the ring picks "a"
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
		wait.For(t, "each consumer to hear its state from its subscribe", func() bool {
			return ra.last() == "active" && rb.last() == "inactive"
		})
		ca.Close()
		wait.For(t, "the standby to hear that it took over", func() bool { return rb.last() == "active" })
	})
}
