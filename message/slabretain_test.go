package message_test

import (
	"runtime"
	"testing"
	"unsafe"
	"weak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a Slab keeps the payloads of the messages it made, once they
// are dropped, only while their block is its current one: at most the
// messages of one block (about 8 KiB of messages), whatever it made
// before. A source making messages from a Slab keeps that many payloads
// past their outcomes until it makes more messages.
func TestASlabKeepsAtMostTheCurrentBlocksPayloads(t *testing.T) {
	perBlock := (8192 - 8) / int(unsafe.Sizeof(message.Message[*[64]byte]{}))
	n := 5*perBlock + perBlock/2
	var slab message.Slab[*[64]byte]
	ws := make([]weak.Pointer[[64]byte], n)
	for i := range n {
		p := new([64]byte)
		ws[i] = weak.Make(p)
		slab.NewKeyed(p, nil, uint64(i), "k")
	}
	wait.Reachable(ws)
	defer runtime.KeepAlive(&slab) // held, as a source holds its slab
	for i, w := range ws[:n-perBlock] {
		if w.Value() != nil {
			t.Fatalf("the payload of message %d of %d still reachable: only the current block's (the last %d) may be", i, n, perBlock)
		}
	}
	live := 0
	for _, w := range ws {
		if w.Value() != nil {
			live++
		}
	}
	t.Logf("%d of %d payloads reachable through the slab, at most %d", live, n, perBlock)
	if live > perBlock {
		t.Fatalf("%d payloads reachable, want at most %d", live, perBlock)
	}
}
