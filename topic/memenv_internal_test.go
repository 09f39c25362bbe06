package topic

import (
	"testing"
	"unsafe"
)

// The in-memory queues and ring hold a message in 32 bytes for a
// word-sized payload, one word less than an Envelope: the hand-off between
// publisher and receivers slows markedly with the larger element
// (BenchmarkTopicHop, balanced/batch).
func TestQueuedMessageStaysSmall(t *testing.T) {
	if got := unsafe.Sizeof(memEnv[int]{}); got != 32 {
		t.Fatalf("a queued message of int is %d bytes, want 32", got)
	}
	if got := unsafe.Sizeof(rslot[int]{}); got != 40 {
		t.Fatalf("a ring slot of int is %d bytes, want 40", got)
	}
}
