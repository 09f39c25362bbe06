package pulsartest

import (
	"fmt"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// An Exclusive consumer's read is at most 100 entries, whatever its
// permits (dispatcherMaxReadBatchSize): 200 batches of 2 messages to a
// consumer that granted 150 permits send the first 100 batches, 200
// messages, and its permits go to -50; the rest waits for refills.
func TestExclusiveReadStopsAtAHundredEntries(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("read-cap")
	publishBatches(t, b, topic, "k", 200, 2)
	r := connectedRaw(t, b)
	rawSubscribe(r, topic, "s", subExclusive, 1, 1)
	rawFlow(r, 1, 150)
	for range 100 {
		r.expect(cmdMessage)
	}
	r.quiet()
	wantPushed(t, b, topic, 200, -50)
}

// With StrictBatchPermits a batch of exactly half the consumer's most
// permits is not one of the large batches sent on any permit: it waits
// until the permits cover it. A consumer that granted 20 permits is sent a
// batch of 15 (5 permits left), and a batch of 10 after it waits.
func TestStrictPermitsHoldABatchOfHalfTheQueue(t *testing.T) {
	b := startBrokerWith(t, Options{StrictBatchPermits: true})
	topic := FullTopicName("strict-half")
	publishBatches(t, b, topic, "k", 1, 15)
	publishBatches(t, b, topic, "k", 1, 10)
	r := connectedRaw(t, b)
	rawSubscribe(r, topic, "s", subExclusive, 1, 1)
	rawFlow(r, 1, 20)
	r.expect(cmdMessage)
	r.quiet()
	wantPushed(t, b, topic, 15, 5)
	rawFlow(r, 1, 5)
	r.expect(cmdMessage)
	r.quiet()
	wantPushed(t, b, topic, 25, 0)
}

// A Shared consumer's turn stops at its unacked limit, as a real broker's
// does (maxUnackedMessagesPerConsumer caps the messages of a turn): with a
// limit of 10 and batches of 4, each of two consumers gets turns of 2
// batches, then 1 batch that takes it past the limit, so the consumers
// alternate: the first gets entries 0, 1 and 4, the second 2, 3 and 5.
func TestSharedTurnStopsAtTheUnackedLimit(t *testing.T) {
	b := startBrokerWith(t, Options{MaxUnackedPerConsumer: 10})
	topic := FullTopicName("shared-turn-limit")
	if err := b.CreateTopic(topic, 0); err != nil {
		t.Fatal(err)
	}
	b.StallDispatch(topic, true)
	r := connectedRaw(t, b)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	rawSubscribe(r, topic, "s", subShared, 2, 2)
	rawFlow(r, 1, 100)
	rawFlow(r, 2, 100)
	publishBatches(t, b, topic, "k", 6, 4)
	r.quiet()
	b.StallDispatch(topic, false)
	got := map[uint64][]uint64{}
	for range 6 {
		f, _ := r.expect(cmdMessage)
		id, err := decodeMsgID(f.bs[2])
		if err != nil {
			t.Fatal(err)
		}
		got[f.u[1]] = append(got[f.u[1]], id.entry)
	}
	if want := map[uint64][]uint64{1: {0, 1, 4}, 2: {2, 3, 5}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entries by consumer %v, want %v", got, want)
	}
}

// expectSkippingNotices returns the next command of type typ on r, passing
// over the ACTIVE_CONSUMER_CHANGE notices before it.
func expectSkippingNotices(r *rawConn, typ int) flat {
	r.t.Helper()
	for {
		got, f, _ := r.read()
		if got == typ {
			return f
		}
		if got != cmdActiveConsumerChange {
			r.t.Fatalf("got %s %v, want %s", cmdName(got), f, cmdName(typ))
		}
	}
}

// On a Failover subscription a redelivery request from a consumer that is
// not the active one is ignored, as a real broker ignores it
// (PersistentDispatcherSingleActiveConsumer.redeliverUnacknowledgedMessages):
// the active consumer's unacknowledged messages are not sent again.
func TestFailoverRedeliveryFromTheStandbyIsIgnored(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("failover-standby-redeliver")
	conns := []*rawConn{dialRaw(t, b), dialRaw(t, b)}
	for i, r := range conns {
		r.connect(20)
		r.send(cmdSubscribe, func(o []byte) []byte {
			o = appendStringField(o, 1, topic)
			o = appendStringField(o, 2, "s")
			o = appendVarintField(o, 3, subFailover)
			o = appendVarintField(o, 4, 1)
			o = appendVarintField(o, 5, 1)
			return appendStringField(o, 6, fmt.Sprint("c", i))
		}, nil)
		expectSkippingNotices(r, cmdSuccess)
		rawFlow(r, 1, 100)
		r.quiet()
	}
	publishN(t, b, topic, 3)
	st := b.Consumers(topic, "s")
	active, standby := 0, 1
	if !st[0].Active {
		active, standby = 1, 0
	}
	for range 3 {
		expectSkippingNotices(conns[active], cmdMessage)
	}
	conns[standby].send(cmdRedeliver, func(o []byte) []byte { return appendVarintField(o, 1, 1) }, nil)
	conns[standby].send(cmdPing, nil, nil)
	expectSkippingNotices(conns[standby], cmdPong)
	if st := b.Consumers(topic, "s")[active]; st.Dispatched != 3 || st.Redelivered != 0 {
		t.Fatalf("active consumer: dispatched %d, redelivered %d after the standby's redelivery request; want 3 and 0", st.Dispatched, st.Redelivered)
	}
}

// chunkSection is chunk id of a message of n chunks, uuid, as a producer
// sends it.
func chunkSection(uuid string, id, n int) []byte {
	meta := appendMetaHead(nil, Message{}, 0, time.Now())
	meta = appendStringField(meta, 26, uuid)
	meta = appendVarintField(meta, 27, uint64(n))
	meta = appendVarintField(meta, 29, uint64(id))
	return buildPayloadSection(meta, fmt.Appendf(nil, "chunk %d", id))
}

// On a Shared subscription the next chunk of a message waits for the
// permits of the consumer that got its first chunk, even while another
// consumer has permits.
func TestSharedChunkWaitsForItsConsumersPermits(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("shared-chunk-permits")
	r := connectedRaw(t, b)
	rawProducer(r, topic)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	rawSubscribe(r, topic, "s", subShared, 2, 2)
	rawFlow(r, 1, 1)
	rawSend(r, 0, chunkSection("m", 0, 2))
	if f, _ := r.expect(cmdMessage); f.u[1] != 1 {
		t.Fatalf("first chunk pushed to consumer %d, want 1", f.u[1])
	}
	r.expect(cmdSendReceipt)
	rawFlow(r, 2, 10)
	rawSend(r, 1, chunkSection("m", 1, 2))
	r.expect(cmdSendReceipt) // and no MESSAGE: consumer 1 has no permits
	rawFlow(r, 1, 1)
	if f, _ := r.expect(cmdMessage); f.u[1] != 1 {
		t.Fatalf("last chunk pushed to consumer %d, want 1", f.u[1])
	}
}

// A message a Shared subscription holds for delayed delivery is sent at
// once when the subscription turns Failover, as a real broker's new
// single-active dispatcher rewinds the cursor and delays nothing.
func TestDelayedMessageSentAtOnceWhenSharedTurnsFailover(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("delayed-turns-failover")
	r := connectedRaw(t, b)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	ids, err := b.Publish(ctxT(t), topic, Message{Payload: []byte("delayed"), DeliverAt: time.Now().Add(time.Hour)}, Message{Payload: []byte("m1")})
	if err != nil {
		t.Fatal(err)
	}
	rawFlow(r, 1, 10)
	r.expect(cmdMessage)
	rawAck(r, ids[1].LedgerID, ids[1].EntryID)
	r.send(cmdCloseConsumer, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendVarintField(o, 2, 2)
	}, nil)
	r.expect(cmdSuccess)
	r.send(cmdSubscribe, func(o []byte) []byte {
		o = appendStringField(o, 1, topic)
		o = appendStringField(o, 2, "s")
		o = appendVarintField(o, 3, subFailover)
		o = appendVarintField(o, 4, 2)
		return appendVarintField(o, 5, 3)
	}, nil)
	expectSkippingNotices(r, cmdSuccess)
	rawFlow(r, 2, 10)
	r.send(cmdPing, nil, nil)
	f := expectSkippingNotices(r, cmdMessage)
	if id, err := decodeMsgID(f.bs[2]); err != nil || f.u[1] != 2 || id.entry != ids[0].EntryID {
		t.Fatalf("pushed %+v (%v), want the delayed entry %d to consumer 2", f, err, ids[0].EntryID)
	}
	expectSkippingNotices(r, cmdPong)
}

// A delayed message due before the one the broker's timer waits for is
// released at its own time: here after 50 ms, though a message due in an
// hour was held first.
func TestEarlierDelayedMessageIsNotKeptWaitingForALaterOne(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("delayed-earlier")
	r := connectedRaw(t, b)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	rawFlow(r, 1, 10)
	r.quiet()
	if _, err := b.Publish(ctxT(t), topic, Message{Payload: []byte("late"), DeliverAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the timer to wait for the late message", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.nextWake != 0
	})
	ids, err := b.Publish(ctxT(t), topic, Message{Payload: []byte("soon"), DeliverAt: time.Now().Add(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := r.expect(cmdMessage)
	if id, err := decodeMsgID(f.bs[2]); err != nil || id.entry != ids[0].EntryID {
		t.Fatalf("pushed %+v (%v), want the message due soon, entry %d", f, err, ids[0].EntryID)
	}
}
