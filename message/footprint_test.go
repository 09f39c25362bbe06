package message_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a message costs 64 bytes beyond its payload (the header
// docs/architecture.md describes), whatever the payload type.
func TestHeaderIs64Bytes(t *testing.T) {
	if got := unsafe.Sizeof(message.Message[struct{}]{}); got != 64 {
		t.Errorf("Message[struct{}] is %d bytes, want 64", got)
	}
	if got, data := unsafe.Sizeof(message.Message[[]byte]{}), unsafe.Sizeof([]byte(nil)); got-data != 64 {
		t.Errorf("Message[[]byte] is %d bytes, %d beyond its payload, want 64", got, got-data)
	}
}

// Guarantee: a message that sets no rarely used field (error, routing,
// partition key) is one allocation from New to its outcome, ack data
// included.
func TestCommonMessageIsOneAllocation(t *testing.T) {
	var g acker.Group
	allocs := testing.AllocsPerRun(1000, func() {
		m := message.New([]byte(nil), acker.Discard, 7)
		m.SetAckData(acker.Discard) // an interface holding a pointer: no allocation of its own
		m.SetBatcher(message.DefaultBatcher)
		m.SetBatchKey("")
		m.SetPartitionKey("")
		m.Defer()
		m.AddTo(&g)
		g.Flush(t.Context(), nil)
	})
	if allocs != 1 {
		t.Fatalf("%.1f allocations per message, want 1", allocs)
	}
}

// Guarantee: the rarely used fields keep their values and the ack data
// however they are set, cleared by Reuse as documented, and carried by
// Transfer and Detach.
func TestRareFieldsKeepAckData(t *testing.T) {
	rec := acker.NewRecorder(false)
	m := message.New("x", rec, 3)
	m.SetAckData("before")
	m.SetPartitionKey("p")
	m.SetBatcher("b")
	m.SetBatchKey("k")
	boom := errors.New("boom")
	m.Fail(boom)
	if _, _, d := m.Acknowledger(); d != "before" {
		t.Fatalf("ack data %v after the rare fields were set, want before", d)
	}
	m.SetAckData("after")
	if _, _, d := m.Acknowledger(); d != "after" || m.PartitionKey() != "p" || m.Batcher() != "b" || m.BatchKey() != "k" || m.Err() != boom {
		t.Fatalf("got data %v key %q batcher %q batch key %q err %v", d, m.PartitionKey(), m.Batcher(), m.BatchKey(), m.Err())
	}
	if o := m.Outcome(); o.Data != "after" || o.Err != boom || o.ID != 3 {
		t.Fatalf("Outcome() = %+v", o)
	}

	var out message.Message[int]
	message.Transfer(&out, m, 1)
	if _, _, d := out.Acknowledger(); d != "after" || out.PartitionKey() != "p" || out.Batcher() != "b" || out.Err() != boom {
		t.Fatalf("transferred: data %v, %v", d, &out)
	}

	var det message.Message[int]
	message.Detach(&det, m, 2)
	if a, id, d := det.Acknowledger(); a != acker.Discard || id != 3 || d != nil || !det.Acknowledged() ||
		det.PartitionKey() != "p" || det.Batcher() != "b" || det.BatchKey() != "k" || det.Err() != boom {
		t.Fatalf("detached: ack %v id %d data %v, %v", a, id, d, &det)
	}
	m.SetBatcher("c") // the detached copy has its own rare fields
	if det.Batcher() != "b" {
		t.Fatalf("detached copy follows its source: batcher %q", det.Batcher())
	}

	m.Reuse("y", 4)
	if _, id, d := m.Acknowledger(); id != 4 || d != "after" || m.PartitionKey() != "p" ||
		m.Batcher() != message.DefaultBatcher || m.BatchKey() != "" || m.Err() != nil || m.Failed() {
		t.Fatalf("reused: id %d data %v %v", id, d, m)
	}
	m.Init("z", rec, 5)
	if _, _, d := m.Acknowledger(); d != nil || m.PartitionKey() != "" || m.Metadata != nil {
		t.Fatalf("Init kept data %v or partition key %q", d, m.PartitionKey())
	}
}

// benchMessageSink keeps what the allocation benchmarks make reachable, so
// that the compiler cannot keep it on the stack.
var benchMessageSink any

// BenchmarkNewMessage: what making one message costs, against the 32-byte
// struct{id; data} a hand-written pipeline allocates per record (the
// minimal pipeline of bench/minimal), both carrying a 16-byte payload.
func BenchmarkNewMessage(b *testing.B) {
	payload := make([]byte, 16)
	b.Run("message.New", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			benchMessageSink = message.New(payload, acker.Discard, uint64(i))
		}
	})
	b.Run("hand-written", func(b *testing.B) {
		type msg struct {
			id   uint64
			data []byte
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			benchMessageSink = &msg{id: uint64(i), data: payload}
		}
	})
}
