package pulsartest

import (
	"math"
	"testing"
)

// rawLastMessageID asks for the last message id of consumer 1's topic on
// r and returns it with the subscription's mark-delete position.
func rawLastMessageID(r *rawConn, reqID uint64) (last, markDelete msgID) {
	r.t.Helper()
	r.send(cmdGetLastMessageID, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendVarintField(o, 2, reqID)
	}, nil)
	f, _ := r.expect(cmdGetLastMessageIDResp)
	last, err := decodeMsgID(f.bs[1])
	if err != nil {
		r.t.Fatal(err)
	}
	if markDelete, err = decodeMsgID(f.bs[3]); err != nil {
		r.t.Fatal(err)
	}
	return last, markDelete
}

// GET_LAST_MESSAGE_ID answers the newest entry and the subscription's
// mark-delete position: the last entry of its acknowledged prefix, entry
// -1 while there is none. An entry acknowledged after a gap does not move
// it.
func TestLastMessageIDCarriesTheMarkDeletePosition(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("last-id-mark-delete")
	r := publishedConsumer(t, b, topic, subExclusive, 4)
	if last, md := rawLastMessageID(r, 2); last.entry != 3 || md.entry != math.MaxUint64 {
		t.Fatalf("before any ack: last entry %d, mark-delete entry %d; want 3 and -1", last.entry, int64(md.entry))
	}
	rawFlow(r, 1, 4)
	var ledger uint64
	for range 4 {
		f, _ := r.expect(cmdMessage)
		id, err := decodeMsgID(f.bs[2])
		if err != nil {
			t.Fatal(err)
		}
		ledger = id.ledger
	}
	rawAck(r, ledger, 0)
	rawAck(r, ledger, 1)
	rawAck(r, ledger, 3)
	if _, md := rawLastMessageID(r, 3); md.entry != 1 {
		t.Fatalf("after acking entries 0, 1 and 3: mark-delete entry %d, want 1", int64(md.entry))
	}
}

// A forced UNSUBSCRIBE deletes the subscription although other consumers
// are attached: they are closed (CLOSE_CONSUMER) and its backlog is gone.
func TestForcedUnsubscribeClosesTheOtherConsumers(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("forced-unsubscribe")
	r := publishedConsumer(t, b, topic, subShared, 1)
	rawSubscribe(r, topic, "s", subShared, 2, 2)
	r.send(cmdUnsubscribe, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		o = appendVarintField(o, 2, 3)
		return appendVarintField(o, 3, 1) // force
	}, nil)
	if f, _ := r.expect(cmdCloseConsumer); f.u[1] != 2 {
		t.Fatalf("CLOSE_CONSUMER %+v, want one for consumer 2", f)
	}
	if f, _ := r.expect(cmdSuccess); f.u[1] != 3 {
		t.Fatalf("success %+v", f)
	}
	if got := b.Backlog(topic, "s"); got != -1 {
		t.Fatalf("subscription still there, backlog %d", got)
	}
}

// An entry acknowledged twice is counted once in its consumer's Acked,
// while an entry before it is still unacknowledged.
func TestAckOfAnAckedEntryCountsOnce(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("ack-twice")
	r := publishedConsumer(t, b, topic, subShared, 2)
	rawFlow(r, 1, 2)
	f, _ := r.expect(cmdMessage)
	id, err := decodeMsgID(f.bs[2])
	if err != nil {
		t.Fatal(err)
	}
	r.expect(cmdMessage)
	rawAck(r, id.ledger, 1)
	rawAck(r, id.ledger, 1)
	r.quiet()
	if st := b.Consumers(topic, "s")[0]; st.Acked != 1 {
		t.Fatalf("Acked = %d after acking entry 1 twice, want 1", st.Acked)
	}
}

// An ACK that asks for a response, from a consumer the connection does
// not have, is answered with ConsumerNotFound.
func TestAckResponseForAnUnknownConsumerIsAnError(t *testing.T) {
	b := startBroker(t)
	r := connectedRaw(t, b)
	r.send(cmdAck, func(o []byte) []byte {
		o = appendVarintField(o, 1, 99)
		o = appendVarintField(o, 2, 0)
		o = appendMsgID(o, 3, msgID{ledger: 1, entry: 0, partition: -1, batchIndex: -1})
		return appendVarintField(o, 8, 5)
	}, nil)
	f, _ := r.expect(cmdAckResponse)
	if f.u[1] != 99 || f.u[6] != 5 || ServerErrorCode(f.u[4]) != ConsumerNotFound {
		t.Fatalf("ACK_RESPONSE %+v, want consumer 99, request 5, ConsumerNotFound", f)
	}
}

// A Key_Shared sticky hash range holds both its ends: a key whose hash is
// a range's end goes to the consumer of that range.
func TestStickyRangeHoldsItsEnd(t *testing.T) {
	b := startBroker(t)
	topic := FullTopicName("sticky-end")
	h := int32(murmur3([]byte("k")) % keyHashRange)
	r := connectedRaw(t, b)
	if typ, f := rawSubscribeSticky(r, topic, 1, 1, [2]int32{h - 1, h}); typ != cmdSuccess {
		t.Fatalf("subscribe: %s %+v", cmdName(typ), f)
	}
	publishBatches(t, b, topic, "k", 1, 1)
	rawFlow(r, 1, 1)
	r.send(cmdPing, nil, nil)
	r.expect(cmdMessage)
	r.expect(cmdPong)
}
