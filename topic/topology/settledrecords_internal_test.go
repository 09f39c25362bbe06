package topology

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"testing"
	"unsafe"
	"weak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// payload is a value large enough to matter, of its own allocation.
type payload [1 << 10]byte

// Guarantee: the value of a settled message, acked or failed, is not
// kept by the messages delivered in its batch that are still in flight,
// even when they were made from the next slab block: once the message and
// its block are dropped, its value is unreachable.
func TestASettledMessagesValueIsNotKeptByTheRestOfItsBatch(t *testing.T) {
	t.Run("acked", func(t *testing.T) {
		settledValueNotKept(t, func(s *Source[*payload], m *message.Message[*payload]) {
			s.Ack(t.Context(), []acker.Outcome{m.Outcome()}, nil)
		})
	})
	t.Run("rejected", func(t *testing.T) {
		settledValueNotKept(t, func(s *Source[*payload], m *message.Message[*payload]) {
			m.Fail(Reject(errors.New("rejected")))
			s.Ack(t.Context(), nil, []acker.Outcome{m.Outcome()})
		})
	})
}

// settledValueNotKept settles the first of a batch of two messages, the
// second made from the next slab block and still in flight, with settle,
// and checks that the first's value is unreachable once dropped.
func settledValueNotKept(t *testing.T, settle func(*Source[*payload], *message.Message[*payload])) {
	m, err := NewMemory[*payload](MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	top, err := New("t").Build()
	if err != nil {
		t.Fatal(err)
	}
	q, err := m.Declare(t.Context(), top)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := q.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close(context.Background())
	h := &heldReader[*payload]{rd: rd}
	s := &Source[*payload]{t: top, q: q, log: slog.New(slog.DiscardHandler)}

	// Leave one message in the slab's first block (of about 8 KiB, see
	// message.Slab), so that a batch of two straddles it and the next.
	var slab message.Slab[*payload]
	size := unsafe.Sizeof(message.Message[*payload]{})
	for range (8192-8)/int(size) - 1 {
		slab.New(nil, s, 0)
	}

	settled, inFlight := new(payload), new(payload)
	w := weak.Make(settled)
	ls := []pendingLetter[*payload]{{l: Letter[*payload]{Value: settled}, r: h}, {l: Letter[*payload]{Value: inFlight}, r: h}}
	h.out.Add(2)
	msgs := s.messages(&slab, ls)
	if uintptr(unsafe.Pointer(msgs[1])) == uintptr(unsafe.Pointer(msgs[0]))+size {
		t.Fatal("the batch's messages come from one slab block")
	}
	kept := msgs[1]
	settle(s, msgs[0])
	clear(msgs)
	clear(ls)
	settled = nil
	if wait.Reachable([]weak.Pointer[payload]{w}) != 0 {
		t.Errorf("a settled message's value is still reachable while a message of its batch is in flight")
	}
	runtime.KeepAlive(kept)
}
