package message_test

import (
	"errors"
	"math"
	"strconv"
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
		// Every other message has a partition key, whose extra fields
		// come from a block too.
		m := slab.New([]byte{byte(i)}, acker.Discard, uint64(i))
		if i%2 == 1 {
			m = slab.NewKeyed([]byte{byte(i)}, acker.Discard, uint64(i), keyOf(i))
		}
		if m.Failed() || m.BatchKey() != "" || m.Metadata != nil || m.PartitionKey() != keyOf(i) {
			t.Errorf("message %d is not fresh: failed %v, batch key %q, metadata %v, partition key %q", i, m.Failed(), m.BatchKey(), m.Metadata, m.PartitionKey())
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
		if id := m.Outcome().ID; id != uint64(i) || len(m.Data) != 2 || m.Data[0] != byte(i) || m.PartitionKey() != keyOf(i) {
			t.Errorf("message %d now has id %d, data %v and partition key %q", i, id, m.Data, m.PartitionKey())
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

// keyOf is the partition key TestSlabNeverReusesAMessageItHandedOut gives
// message i: none for an even i.
func keyOf(i int) string {
	if i%2 == 0 {
		return ""
	}
	return strconv.Itoa(i % 10)
}

// Guarantee: a Slab makes messages with a partition key at one allocation
// per block of messages and one per block of their extra fields, not one
// per message, and such a message keeps its ack data and key apart; a
// message without a key takes no extra fields.
func TestSlabKeyedMessagesAllocatePerBlock(t *testing.T) {
	perMsg := int((8192 - 8) / unsafe.Sizeof(message.Message[[]byte]{}))
	// The extra fields (ack data, error, partition key, batcher, batch
	// key) are 80 bytes.
	perExtra := (8192 - 8) / 80
	var slab message.Slab[[]byte]
	data := []byte("d")
	if allocs, want := fewestAllocs(func() {
		for range perMsg * perExtra {
			slab.NewKeyed(data, acker.Discard, 1, "k")
		}
	}), float64(perMsg+perExtra); allocs != want {
		t.Errorf("%v allocations per %d keyed messages, want %v (one per block)", allocs, perMsg*perExtra, want)
	}
	var keyless message.Slab[[]byte]
	if allocs, want := fewestAllocs(func() {
		for range perMsg * perExtra {
			keyless.NewKeyed(data, acker.Discard, 1, "")
		}
	}), float64(perExtra); allocs != want {
		t.Errorf("%v allocations per %d messages without a key, want %v (one per block of messages, none for extra fields)", allocs, perMsg*perExtra, want)
	}
	m := slab.NewKeyed(data, acker.Discard, 9, "key")
	m.SetAckData("ack")
	if _, id, ack := m.Acknowledger(); m.PartitionKey() != "key" || id != 9 || ack != "ack" {
		t.Errorf("keyed message: partition key %q, id %d, ack data %v", m.PartitionKey(), id, ack)
	}
	if m := slab.NewKeyed(data, acker.Discard, 10, ""); m.PartitionKey() != "" {
		t.Errorf("message without a key has partition key %q", m.PartitionKey())
	}
}

// fewestAllocs is the fewest allocations of three measurements of f: an
// allocation elsewhere in the process (the runtime's, under the race
// detector on a busy machine) only adds to one.
func fewestAllocs(f func()) float64 {
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(5, f))
	}
	return allocs
}
