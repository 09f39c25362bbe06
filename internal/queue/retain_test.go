package queue

import (
	"runtime"
	"testing"
	"weak"
)

type item [1 << 10]byte

// Guarantee: a taken item is not kept reachable by the queue's ring, also
// when the items taken wrap around its end: the slots they leave are
// zeroed, whichever side of the wrap they are on.
func TestTakenItemsAreNotKeptByTheRingAcrossItsWrap(t *testing.T) {
	q := New[*item](4)
	var ws []weak.Pointer[item]
	publish := func(k int) {
		for range k {
			v := new(item)
			ws = append(ws, weak.Make(v))
			if ok, err := q.TryPublish(v); !ok || err != nil {
				t.Fatalf("TryPublish: %v, %v", ok, err)
			}
		}
	}
	buf := make([]*item, 4)
	publish(3)
	if n, err := q.TryReceive(buf[:2]); n != 2 || err != nil {
		t.Fatalf("TryReceive: %d, %v", n, err)
	}
	clear(buf)
	collected(t, ws[:2])
	publish(3) // the ring now holds items in slots 2, 3, 0 and 1
	if n, err := q.TryReceive(buf); n != 4 || err != nil {
		t.Fatalf("TryReceive: %d, %v", n, err)
	}
	clear(buf)
	collected(t, ws)
	runtime.KeepAlive(q)
}

// collected checks that none of ws is reachable once garbage is collected.
func collected(t *testing.T, ws []weak.Pointer[item]) {
	t.Helper()
	runtime.GC()
	runtime.GC()
	for i, w := range ws {
		if w.Value() != nil {
			t.Errorf("item %d of %d, taken, still reachable from the queue", i, len(ws))
		}
	}
}
