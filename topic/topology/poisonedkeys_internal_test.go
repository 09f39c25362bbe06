package topology

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testsize"
	"github.com/boulevard-go/boulevard/internal/wait"
)

// Guarantee: a sequenced source counts each key it remembers as poisoned
// once: a key poisoned again (a second message of it failing) and the
// later letters of a poisoned key leave the count as it was, and neither
// an assignment that keeps the keys' shard nor a drain changes it while
// the keys stay remembered.
func TestPoisonedKeysCountsAKeyPoisonedTwiceOnce(t *testing.T) {
	q := newTestSequencer(4, 100)
	q.poison("A", 0, "first failure")
	q.poison("B", 0, "failure")
	q.drained("A")
	q.poison("A", 0, "second failure")
	if got := q.poisonedKeys(); got != 2 {
		t.Fatalf("keys A (poisoned twice) and B poisoned: %d poisoned keys, want 2", got)
	}
	for range 3 {
		q.drained("A")
		if got := q.admit(Letter[int]{Key: "A", Value: 1}, nil); got != admitPoisoned {
			t.Fatalf("a later letter of poisoned key A: admission %d, want poisoned", got)
		}
	}
	q.admit(Letter[int]{Key: "C", Value: 1}, nil) // in flight, not poisoned
	if got := q.poisonedKeys(); got != 2 {
		t.Fatalf("after later letters of A and a letter of C: %d poisoned keys, want 2", got)
	}
	q.assigned(&heldReader[int]{}, func(shard int) bool { return shard == 0 })
	q.drain()
	poisoned := 0
	for _, ks := range q.keys {
		if ks.poisoned {
			poisoned++
		}
	}
	if got := q.poisonedKeys(); got != poisoned || got != 2 {
		t.Fatalf("after an assignment and a drain: %d poisoned keys counted, %d remembered, want 2", got, poisoned)
	}
}

// BenchmarkPoisonedKeyMemory measures the live heap a sequenced source
// keeps for each key it remembers as poisoned (B/key), the key's own
// bytes and the text of the failure that poisoned it left out: it
// poisons BOULEVARD_POISONED_KEYS distinct keys (100,000 by default).
//
//	go test -run '^$' -bench PoisonedKeyMemory -benchtime 3x ./topic/topology/
func BenchmarkPoisonedKeyMemory(b *testing.B) {
	n := testsize.Count(b, "BOULEVARD_POISONED_KEYS", 100_000, 100_000)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "device-" + strconv.Itoa(i)
	}
	var perKey float64
	for b.Loop() {
		before := wait.LiveHeap()
		q := newTestSequencer(64, DefaultMaxHeldBack)
		for _, k := range keys {
			q.poison(k, 0, "reading out of range")
		}
		grown := wait.LiveHeap() - before
		runtime.KeepAlive(q)
		perKey = float64(grown) / float64(n)
	}
	b.ReportMetric(perKey, "B/key")
}
