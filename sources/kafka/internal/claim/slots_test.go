package claim

import (
	"testing"

	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: slots come from the free list before new blocks are allocated,
// and every slot handed out is live.
func TestTakeSlotsReusesFreeOnes(t *testing.T) {
	p := &Claim{maxFree: 100}
	first := p.takeSlots(nil, 3)
	if len(first) != 3 {
		t.Fatalf("took %d slots, want 3", len(first))
	}
	// The rest of the first block waits on the free list.
	if len(p.free) != slotBlock-3 {
		t.Fatalf("free list holds %d slots after the first block, want %d", len(p.free), slotBlock-3)
	}
	for _, s := range first {
		if !s.live {
			t.Fatal("a slot handed out is not live")
		}
	}
	for _, s := range first {
		p.recycle(s)
	}
	again := p.takeSlots(nil, 3)
	seen := map[*slot]bool{}
	for _, s := range first {
		seen[s] = true
	}
	for _, s := range again {
		if !seen[s] {
			t.Fatal("took a slot other than the three just recycled: the free list is not used last-in first-out")
		}
	}
}

// Guarantee: a recycled slot drops its references to the record (and so to
// sarama's fetch buffer), a second outcome for the same message does not
// put its slot on the free list twice, and the free list stays bounded.
func TestRecycle(t *testing.T) {
	p := &Claim{maxFree: 2}
	s := p.takeSlots(nil, 1)[0]
	s.md.Key = []byte("k")
	s.md.Headers = []Header{{Key: []byte("h")}}
	s.msg.Init([]byte("v"), p, 7)
	s.msg.SetAckData(s)
	s.msg.Metadata = &s.md

	p.free = p.free[:0]
	p.recycle(s)
	p.recycle(s)
	if len(p.free) != 1 {
		t.Fatalf("free list holds %d slots after two outcomes for one message, want 1", len(p.free))
	}
	// Metadata points at the slot's own md, which is no reference to the
	// record.
	if s.msg.Data != nil || s.md.Key != nil || s.md.Headers != nil {
		t.Fatal("a recycled slot still points at its record")
	}
	if s.live {
		t.Fatal("a recycled slot is still live")
	}

	more := p.takeSlots(nil, 3)
	for _, s := range more {
		p.recycle(s)
	}
	if len(p.free) > p.maxFree {
		t.Fatalf("free list holds %d slots, bound %d", len(p.free), p.maxFree)
	}

	// Ack data that is not a slot (another source's, or none) is ignored.
	p.recycle(nil)
	p.recycle("x")
}

// Guarantee: a delivery reuses acknowledged slots and allocates nothing per
// record in the steady state.
func TestSteadyStateDeliveryDoesNotAllocate(t *testing.T) {
	p := &Claim{maxFree: 4 * 64}
	var dst []*slot
	cycle := func() {
		dst = p.takeSlots(dst[:0], 64)
		for _, s := range dst {
			s.msg.Init(nil, p, 0)
			s.msg.SetAckData(s)
			s.msg.Metadata = &s.md
		}
		for _, s := range dst {
			_, _, data := s.msg.Acknowledger()
			p.recycle(data)
		}
	}
	cycle() // grow the free list
	if a := testing.AllocsPerRun(100, cycle); a != 0 {
		t.Fatalf("%v allocations per delivery of 64 records in the steady state, want 0", a)
	}
	var _ *message.Message[[]byte] = &dst[0].msg
}

// Guarantee: the slot of a deferred message is not reused when its outcome
// comes: a deferrer may report it while the pipeline still holds the
// message (see message.Message.Defer).
func TestDeferredMessageSlotIsNotReused(t *testing.T) {
	p := &Claim{maxFree: 100}
	taken := p.takeSlots(nil, 2)
	for _, s := range taken {
		s.msg.Init(nil, p, 0)
		s.msg.SetAckData(s)
	}
	taken[0].msg.Defer()
	free := len(p.free)
	for _, s := range taken {
		_, _, data := s.msg.Acknowledger()
		p.recycle(data)
	}
	if got := len(p.free) - free; got != 1 {
		t.Fatalf("%d slots went back to the free list, want 1: the deferred one is not reused", got)
	}
	for _, s := range p.free {
		if s == taken[0] {
			t.Fatal("the deferred message's slot is on the free list")
		}
	}
}

// Guarantee: a slot whose outcome comes while the free list is full drops
// its references to the record too: the rest of its block stays reachable
// (on the free list, or live), and would keep the record's payload, a
// whole fetch buffer with some clients, after its message was done.
func TestSlotLeftOffTheFullFreeListDropsItsRecord(t *testing.T) {
	p := &Claim{maxFree: 2}
	taken := p.takeSlots(nil, 4)
	p.free = p.free[:0]
	for i, s := range taken {
		s.md.Key = []byte("k")
		s.md.Headers = []Header{{Key: []byte("h")}}
		s.msg.Init(make([]byte, 16), p, uint64(i))
		s.msg.SetAckData(s)
		s.msg.Metadata = &s.md
	}
	for _, s := range taken {
		_, _, data := s.msg.Acknowledger()
		p.recycle(data)
	}
	if len(p.free) != p.maxFree {
		t.Fatalf("free list holds %d slots, want its bound %d", len(p.free), p.maxFree)
	}
	for i, s := range taken {
		if s.msg.Data != nil || s.md.Key != nil || s.md.Headers != nil {
			t.Fatalf("slot %d of %d still points at its record after its outcome (free list bound %d)", i, len(taken), p.maxFree)
		}
	}
}
