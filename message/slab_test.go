package message_test

import (
	"errors"
	"sync"
	"testing"
	"unsafe"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a Slab never hands out a message twice: while the messages it
// made are held, changed and read by another goroutine (as stages and
// acknowledgers do), the Slab goes on making messages, and every held
// message keeps what was set on it. Run with -race: a message reused under
// its holder would be a data race between the two goroutines.
func TestSlabNeverReusesAMessageItHandedOut(t *testing.T) {
	const n = 1000 // several blocks
	var slab message.Slab[[]byte]
	held := make(chan *message.Message[[]byte], 16)
	var wg sync.WaitGroup
	var kept []*message.Message[[]byte]
	wg.Go(func() {
		boom := errors.New("boom")
		for m := range held {
			// What a stage and an acknowledger do with a message.
			m.SetBatchKey("k")
			m.Fail(boom)
			m.Data = append(m.Data, 'x')
			kept = append(kept, m)
			for _, k := range kept[max(0, len(kept)-8):] {
				if k.Err() != boom || k.BatchKey() != "k" {
					t.Errorf("message %d lost what was set on it: err %v, batch key %q", k.Outcome().ID, k.Err(), k.BatchKey())
				}
			}
		}
	})
	for i := range n {
		m := slab.New([]byte{byte(i)}, acker.Discard, uint64(i))
		if m.Failed() || m.BatchKey() != "" || m.Metadata != nil {
			t.Errorf("message %d is not fresh: failed %v, batch key %q, metadata %v", i, m.Failed(), m.BatchKey(), m.Metadata)
		}
		held <- m
	}
	close(held)
	wg.Wait()
	seen := make(map[*message.Message[[]byte]]bool, n)
	for i, m := range kept {
		if seen[m] {
			t.Fatalf("message %d handed out twice", i)
		}
		seen[m] = true
		if id := m.Outcome().ID; id != uint64(i) || len(m.Data) != 2 || m.Data[0] != byte(i) {
			t.Errorf("message %d now has id %d and data %v", i, id, m.Data)
		}
	}
}

// Guarantee: a Slab allocates once per block of about 8 KiB of messages,
// not once per message, and its messages are what message.New makes.
func TestSlabAllocatesPerBlock(t *testing.T) {
	per := int((8192 - 8) / unsafe.Sizeof(message.Message[[]byte]{}))
	var slab message.Slab[[]byte]
	data := []byte("d")
	allocs := testing.AllocsPerRun(10, func() {
		for range per {
			slab.New(data, acker.Discard, 1)
		}
	})
	if allocs != 1 {
		t.Errorf("%v allocations per %d messages, want 1", allocs, per)
	}
	m := slab.New(data, acker.Discard, 9)
	a, id, _ := m.Acknowledger()
	if a != acker.Discard || id != 9 || &m.Data[0] != &data[0] || m.Status() != message.New(data, acker.Discard, 9).Status() {
		t.Errorf("slab message: acknowledger %v, id %d, status %v", a, id, m.Status())
	}
}
