package wait

import (
	"runtime"
	"weak"
)

// Reachable collects garbage until none of ws points to a live value, at
// most a few times (a goroutine may still be letting go of one it just
// handed over), and returns how many still do.
func Reachable[T any](ws []weak.Pointer[T]) int {
	live := 0
	for range 20 {
		runtime.GC()
		runtime.GC()
		live = 0
		for _, w := range ws {
			if w.Value() != nil {
				live++
			}
		}
		if live == 0 {
			return 0
		}
		runtime.Gosched()
	}
	return live
}

// LiveHeap is the live heap after two collections: the second also frees
// what the first moved to the sync.Pools' victim caches.
func LiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
