package batching

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a burst of many distinct batch keys does not pin the memory
// of its open batches once they are emitted: when the partition goes on
// with few keys, its bookkeeping (the spare open batches it recycles, the
// deadline order, the key map) shrinks back to about what those few need,
// so that a long-running batcher does not hold, for the rest of its life,
// memory in proportion to the most keys it ever had open at once.
func TestBookkeepingShrinksAfterABurstOfKeys(t *testing.T) {
	const burst = 100_000
	b := newTestPartition(t, 100)
	ctx := context.Background()
	now := time.Now()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	emitAll := func() {
		for first := b.first(); first != nil; first = b.first() {
			b.cut(first, message.TriggerTimeout)
		}
	}
	add := func(id int, key string) {
		m := message.New(id, nil, uint64(id))
		m.SetBatchKey(key)
		if !b.add(ctx, m, 0, now) {
			t.Fatal("add failed")
		}
	}
	before := heap()
	for i := range burst {
		add(i, "burst-"+strconv.Itoa(i))
	}
	emitAll()
	// The partition goes on with a few keys, batch after batch.
	for i := range 10 {
		add(burst+i, "k"+strconv.Itoa(i%2))
		emitAll()
	}
	retained := int64(heap()) - int64(before)
	if len(b.free) > 4096 || cap(b.order) > 8192 {
		t.Errorf("after the burst: %d spare open batches, deadline order of capacity %d; want them back to what 2 keys need",
			len(b.free), cap(b.order))
	}
	if retained > 4<<20 {
		t.Errorf("%d KiB still held after a burst of %d keys, with 2 keys open since; want under 4 MiB", retained>>10, burst)
	}
	runtime.KeepAlive(b)
}
