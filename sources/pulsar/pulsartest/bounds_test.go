package pulsartest

import (
	"bytes"
	"compress/zlib"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// These tests send what pulsar-client-go never sends (absurd counts and
// sizes) as raw frames, and check that the broker's work stays bounded by
// what it holds or by a protocol maximum: each waits for the broker's
// answer within rawConn's read bound, so a broker busy for minutes under
// its lock fails them.

// appendAckSetID appends a MessageIdData field num for entry of ledger with
// the ack_set words given (bit set: still unacknowledged).
func appendAckSetID(o []byte, num protowire.Number, ledger, entry uint64, words ...uint64) []byte {
	start := len(o)
	o = appendVarintField(o, 1, ledger)
	o = appendVarintField(o, 2, entry)
	for _, w := range words {
		o = appendVarintField(o, 5, w)
	}
	return endNested(o, num, start)
}

// pingThrough sends a PING on r and reads until its PONG, skipping the
// messages the broker pushed before it.
func pingThrough(r *rawConn) {
	r.t.Helper()
	r.send(cmdPing, nil, nil)
	for {
		typ, f, _ := r.read()
		switch typ {
		case cmdPong:
			return
		case cmdMessage:
		default:
			r.t.Fatalf("got %s %v while waiting for PONG", cmdName(typ), f)
		}
	}
}

// Guarantee: with BatchIndexAck, what an ACK costs the broker is bounded
// by the ack_set words it carries and the size of the batch the broker
// stored, never a loop over every index of the batch per message id:
// 200 000 batch-index acks of one 50 000-message batch in one frame (each
// keeping index 0 unacknowledged) are answered within the read bound, and
// leave exactly that message unacknowledged.
func TestBatchIndexAckWorkBoundedByAckSet(t *testing.T) {
	b := startBrokerWith(t, Options{BatchIndexAck: true})
	topic := FullTopicName("batch-index-ack-work")
	const size, acks = 50_000, 200_000
	msgs := make([]Message, size)
	for i := range msgs {
		msgs[i] = Message{Payload: []byte("x")}
	}
	ids, err := b.PublishBatch(ctxT(t), topic, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	r.send(cmdAck, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		o = appendVarintField(o, 2, 0) // individual
		for range acks {
			o = appendAckSetID(o, 3, ids[0].LedgerID, 0, 1)
		}
		return appendVarintField(o, 8, 7) // request id: answer with ACK_RESPONSE
	}, nil)
	if f, _ := r.expect(cmdAckResponse); f.u[6] != 7 || f.u[4] != 0 {
		t.Fatalf("ack response %+v", f)
	}
	if n := b.Backlog(topic, "s"); n != 1 {
		t.Fatalf("backlog %d after acking all but index 0 of the batch, want 1", n)
	}
	if st := b.Consumers(topic, "s")[0]; st.Acked != size-1 {
		t.Fatalf("acked %d, want %d", st.Acked, size-1)
	}
}

// Guarantee: a SEND whose batch claims more messages than its payload can
// hold (each takes at least 6 bytes uncompressed, and a batch at most
// maxBatchMessages) is refused with SEND_ERROR (NotAllowedError) and not
// stored; an honest batch is stored.
func TestBatchCountBeyondPayloadRefused(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	rawProducer(r, "batch-count")
	honest := encodeBatch([]Message{{Payload: []byte("a")}, {Payload: []byte("b")}}, 0, time.Now())
	meta, payload, err := splitPayloadSection(honest)
	if err != nil {
		t.Fatal(err)
	}
	// A field given twice takes its last value, so appending to the
	// metadata overrides what encodeBatch wrote.
	with := func(fields ...uint64) []byte {
		m := slices.Clone(meta)
		for i := 0; i < len(fields); i += 2 {
			m = appendVarintField(m, protowire.Number(fields[i]), fields[i+1])
		}
		return buildPayloadSection(m, payload)
	}
	bad := map[string][]byte{
		"one more than the payload holds": with(11, uint64(len(payload)/minBatchedMessage+1)),
		"MaxInt32":                        with(11, math.MaxInt32),
		"beyond int32":                    with(11, 1<<40),
		"LZ4, more than its uncompressed size holds": with(8, compressLZ4, 9, 12, 11, 3),
	}
	seq := uint64(0)
	for name, section := range bad {
		rawSend(r, seq, section)
		if f, _ := r.expect(cmdSendError); ServerErrorCode(f.u[3]) != NotAllowedError || f.u[2] != seq {
			t.Fatalf("%s: send error %+v", name, f)
		}
		seq++
	}
	rawSend(r, seq, honest)
	r.expect(cmdSendReceipt)
	if ms := b.Messages("batch-count"); len(ms) != 2 || string(ms[1].Payload) != "b" {
		t.Fatalf("stored %+v, want the honest batch alone", ms)
	}
}

// Guarantee: an ACK or a REDELIVER_UNACKNOWLEDGED_MESSAGES frame makes the
// broker allocate about the frame's own size, whatever number of message
// ids it holds: a 4.4 MiB frame of 750 000 ids costs less than 4 times its
// size (reading it, in a buffer that grows as its bytes arrive, takes
// about 3 times).
func TestLargeAckFramesAllocateAboutTheirSize(t *testing.T) {
	for name, typ := range map[string]int{"ack": cmdAck, "redeliver": cmdRedeliver} {
		t.Run(name, func(t *testing.T) {
			b := startBroker(t)
			r := dialRaw(t, b)
			r.connect(maxProtocolVersion)
			rawSubscribe(r, "ack-frames", "s", subShared, 1, 1)
			idField := protowire.Number(3) // CommandAck.message_id
			if typ == cmdRedeliver {
				idField = 2 // CommandRedeliverUnacknowledgedMessages.message_ids
			}
			o, fs, bs := beginFrame(nil, typ)
			o = appendVarintField(o, 1, 1)
			for range 750_000 {
				o = appendAckSetID(o, idField, 0, 0)
			}
			frame := endFrame(o, typ, fs, bs, nil)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := r.nc.Write(frame); err != nil {
				t.Fatal(err)
			}
			r.quiet() // the frame was handled
			runtime.ReadMemStats(&after)
			grown := after.TotalAlloc - before.TotalAlloc
			t.Logf("a %d KiB frame allocated %d KiB", len(frame)>>10, grown>>10)
			if grown > 4*uint64(len(frame)) {
				t.Fatalf("a %d KiB frame allocated %d KiB, want under 4 times its size", len(frame)>>10, grown>>10)
			}
		})
	}
}

// Guarantee: a REDELIVER_UNACKNOWLEDGED_MESSAGES costs the broker work
// bounded by the frame plus what the consumer holds, not their product:
// on an Exclusive subscription (which, like Failover, rewinds on any
// request) whose consumer holds 20 000 messages, a request naming 200 000
// ids is done within the read bound (the PING sent after it is answered),
// and names none of the held messages.
func TestRedeliveryWorkBoundedByFrameAndHeld(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("redeliver-work")
	const held, named = 20_000, 200_000
	r, ids := rawHolding(t, b, topic, subExclusive, held)
	r.send(cmdRedeliver, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		for i := range named {
			o = appendAckSetID(o, 2, ids[0].LedgerID, uint64(held+i))
		}
		return o
	}, nil)
	pingThrough(r)
	if st := b.Consumers(topic, "s")[0]; st.Dispatched != held || st.Nacked != 0 {
		t.Fatalf("dispatched %d, nacked %d; want %d and 0", st.Dispatched, st.Nacked, held)
	}
}

// Guarantee: on a Shared subscription, putting back what a consumer holds
// costs the broker about sorting it, whatever order the request names it
// in: a consumer holding 200 000 messages (no unacked limit) that asks for
// all of them back, last first, is served within the read bound, and the
// messages come back in entry order.
func TestSharedRedeliveryWorkBoundedByHeld(t *testing.T) {
	b := startBrokerWith(t, Options{MaxUnackedPerConsumer: -1})
	topic := FullTopicName("shared-redeliver-work")
	const held = 200_000
	r, ids := rawHolding(t, b, topic, subShared, held)
	r.send(cmdRedeliver, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		for i := held - 1; i >= 0; i-- {
			o = appendAckSetID(o, 2, ids[0].LedgerID, uint64(i))
		}
		return o
	}, nil)
	pingThrough(r) // skips the first deliveries; the permits are used up
	if st := b.Consumers(topic, "s")[0]; st.Dispatched != held || st.Nacked != held {
		t.Fatalf("dispatched %d, nacked %d; want %d and %d", st.Dispatched, st.Nacked, held, held)
	}
	rawFlow(r, 1, 1)
	f, _ := r.expect(cmdMessage)
	if id, err := decodeMsgID(f.bs[2]); err != nil || id.entry != 0 || f.u[3] != 1 {
		t.Fatalf("first redelivery: entry %d (%v), redelivery count %d; want entry 0, count 1", id.entry, err, f.u[3])
	}
}

// rawHolding publishes n one-byte messages to topic and returns their ids
// and a raw connection whose consumer 1, of subscription "s" of type typ,
// was given permits for all of them.
func rawHolding(t *testing.T, b *Broker, topic string, typ, n int) (*rawConn, []MessageID) {
	t.Helper()
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Payload: []byte("x")}
	}
	ids, err := b.Publish(ctxT(t), topic, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	rawSubscribe(r, topic, "s", typ, 1, 1)
	rawFlow(r, 1, uint64(n))
	return r, ids
}

// rawSubscribeSticky sends a Key_Shared SUBSCRIBE with sticky hash ranges
// and returns the broker's answer.
func rawSubscribeSticky(r *rawConn, topic string, consumerID, reqID uint64, ranges ...[2]int32) (int, flat) {
	r.t.Helper()
	r.send(cmdSubscribe, func(o []byte) []byte {
		o = appendStringField(o, 1, topic)
		o = appendStringField(o, 2, "s")
		o = appendVarintField(o, 3, subKeyShared)
		o = appendVarintField(o, 4, consumerID)
		o = appendVarintField(o, 5, reqID)
		meta := len(o)
		o = appendVarintField(o, 1, 1) // STICKY
		for _, rg := range ranges {
			start := len(o)
			o = appendVarintField(o, 1, uint64(int64(rg[0])))
			o = appendVarintField(o, 2, uint64(int64(rg[1])))
			o = endNested(o, 3, start)
		}
		return endNested(o, 17, meta)
	}, nil)
	typ, f, _ := r.read()
	return typ, f
}

// Guarantee: checking a Key_Shared consumer's sticky hash ranges against
// the other consumers' costs the broker work bounded by the hash space,
// not by the product of the range counts clients send: after a consumer
// listing 100 000 ranges, one listing 300 000 others is admitted within
// the read bound, and one overlapping them is refused with "Range
// conflict".
func TestStickyRangeCheckBoundedByHashSpace(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("sticky-ranges")
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	repeat := func(rg [2]int32, n int) [][2]int32 {
		rs := make([][2]int32, n)
		for i := range rs {
			rs[i] = rg
		}
		return rs
	}
	if typ, f := rawSubscribeSticky(r, topic, 1, 1, repeat([2]int32{0, 0}, 100_000)...); typ != cmdSuccess {
		t.Fatalf("first consumer: %s %+v", cmdName(typ), f)
	}
	if typ, f := rawSubscribeSticky(r, topic, 2, 2, repeat([2]int32{1, 1}, 300_000)...); typ != cmdSuccess {
		t.Fatalf("second consumer: %s %+v", cmdName(typ), f)
	}
	typ, f := rawSubscribeSticky(r, topic, 3, 3, [2]int32{1, 5})
	if typ != cmdError || ServerErrorCode(f.u[2]) != ConsumerAssignError || f.u[1] != 3 {
		t.Fatalf("overlapping consumer: %s %+v, want ERROR ConsumerAssignError", cmdName(typ), f)
	}
}

// Guarantee: a sticky hash range whose start is after its end is refused
// with ConsumerAssignError, as a real broker refuses it.
func TestStickyRangeStartAfterEndRefused(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	typ, f := rawSubscribeSticky(r, "sticky-order", 1, 1, [2]int32{0, 10}, [2]int32{20, 19})
	if typ != cmdError || ServerErrorCode(f.u[2]) != ConsumerAssignError || f.str(3) != rangeOrderMsg {
		t.Fatalf("got %s %+v, want ERROR ConsumerAssignError %q", cmdName(typ), f, rangeOrderMsg)
	}
}

// Guarantee: Messages reads back an entry whose declared uncompressed size
// is impossible (a ZLIB entry saying -1 or more than the maximum message
// size) as stored, compressed, instead of allocating that size or
// panicking.
func TestMessagesKeepsEntryWithImpossibleSize(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	rawProducer(r, "zlib-size")
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for seq, size := range []uint64{math.MaxUint64, 1 << 40} { // int -1, 1 TiB
		meta := appendMetaHead(nil, Message{}, uint64(seq), time.Now())
		meta = appendVarintField(meta, 8, compressZLIB)
		meta = appendVarintField(meta, 9, size)
		rawSend(r, uint64(seq), buildPayloadSection(meta, z.Bytes()))
		r.expect(cmdSendReceipt)
	}
	ms := b.Messages("zlib-size")
	if len(ms) != 2 || !bytes.Equal(ms[0].Payload, z.Bytes()) || !bytes.Equal(ms[1].Payload, z.Bytes()) {
		t.Fatalf("read back %+v, want both entries as stored", ms)
	}
}

// Guarantee: what the broker keeps of a consumer's FLOW commands is
// bounded whatever number a client sends: Flows lists the first
// MaxFlowsRecorded, FlowsOmitted counts the rest, and PermitsGranted
// still sums them all.
func TestFlowStatsBounded(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	rawSubscribe(r, "flows", "s", subShared, 1, 1)
	const extra = 1000
	var frames []byte
	for range MaxFlowsRecorded + extra {
		o, fs, bs := beginFrame(frames, cmdFlow)
		o = appendVarintField(o, 1, 1)
		o = appendVarintField(o, 2, 3)
		frames = endFrame(o, cmdFlow, fs, bs, nil)
	}
	if _, err := r.nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	pingThrough(r)
	st := b.Consumers("flows", "s")[0]
	if len(st.Flows) != MaxFlowsRecorded || st.FlowsOmitted != extra || st.PermitsGranted != 3*(MaxFlowsRecorded+extra) {
		t.Fatalf("%d flows listed, %d omitted, %d permits granted; want %d, %d, %d",
			len(st.Flows), st.FlowsOmitted, st.PermitsGranted, MaxFlowsRecorded, extra, 3*(MaxFlowsRecorded+extra))
	}
}

// Guarantee: a consumer's permit counts stop at math.MaxInt64 instead of
// wrapping to negative values: a FLOW that would carry PermitsGranted and
// Available past it leaves them there, and a Shared subscription of two
// such consumers still hands out its backlog in turns of 20 messages.
func TestFlowPermitsSaturate(t *testing.T) {
	b := startBroker(t)
	const topic, backlog = "flows-saturate", 2 * roundRobinBatch
	msgs := make([]Message, backlog)
	for i := range msgs {
		msgs[i] = Message{Payload: []byte("x")}
	}
	if _, err := b.Publish(ctxT(t), topic, msgs...); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	rawSubscribe(r, topic, "s", subShared, 2, 2)
	// 2^31 FLOWs of 2^32-1 permits would take this long to send: set the
	// counts where they would be.
	b.mu.Lock()
	for c := range b.conns {
		for _, cons := range c.consumers {
			cons.permits, cons.st.PermitsGranted = math.MaxInt64-10, math.MaxInt64-10
		}
	}
	b.mu.Unlock()
	rawFlow(r, 1, math.MaxUint32)
	rawFlow(r, 2, math.MaxUint32)
	r.send(cmdPing, nil, nil)
	got := map[uint64]int{}
	for typ := 0; typ != cmdPong; {
		var f flat
		if typ, f, _ = r.read(); typ == cmdMessage {
			got[f.u[1]]++
		}
	}
	if got[1] != roundRobinBatch || got[2] != roundRobinBatch {
		t.Fatalf("messages per consumer %v, want %d each", got, roundRobinBatch)
	}
	// Consumer 1's FLOW dispatched the backlog; consumer 2's came after.
	want := map[uint64]int64{1: math.MaxInt64 - roundRobinBatch, 2: math.MaxInt64}
	for _, st := range b.Consumers(topic, "s") {
		if st.PermitsGranted != math.MaxInt64 || st.Available != want[st.ConsumerID] {
			t.Fatalf("consumer %d: permits granted %d, available %d; want %d and %d",
				st.ConsumerID, st.PermitsGranted, st.Available, int64(math.MaxInt64), want[st.ConsumerID])
		}
	}
}

// Guarantee: what the broker keeps for delayed delivery is bounded by the
// messages held, however often a client makes it forget them: after 50
// rounds of subscribing to a topic holding 1 000 delayed messages and
// unsubscribing again, the timer's queue holds at most twice the messages
// held (plus a constant), and a new subscription holds each of them once.
func TestDelayedQueueBoundedByHeld(t *testing.T) {
	b := startBroker(t)
	const topic, held, rounds = "delayed-churn", 1000, 50
	msgs := make([]Message, held)
	for i := range msgs {
		msgs[i] = Message{Payload: []byte("x"), DeliverAt: time.Now().Add(time.Hour)}
	}
	if _, err := b.Publish(ctxT(t), topic, msgs...); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	for i := range uint64(rounds) {
		rawSubscribe(r, topic, "s", subShared, i, 2*i)
		rawUnsubscribe(r, i, 2*i+1)
		r.expect(cmdSuccess)
	}
	rawSubscribe(r, topic, "s", subShared, rounds, 2*rounds)
	b.mu.Lock()
	queued, holding := len(b.delayed), len(b.topics[FullTopicName(topic)].subs["s"].delayed)
	b.mu.Unlock()
	if queued > 2*held+64 || holding != held {
		t.Fatalf("timer queue of %d for %d messages held (want %d held, at most %d queued)", queued, holding, held, 2*held+64)
	}
}
