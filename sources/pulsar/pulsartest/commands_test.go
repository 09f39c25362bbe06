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
