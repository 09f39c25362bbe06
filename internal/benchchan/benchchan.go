// Package benchchan holds the buffered-channel baseline that the queue and
// topic benchmarks compare themselves with.
package benchchan

import (
	"sync"
	"testing"
)

// Handoff moves b.N items from one goroutine through one buffered channel
// of the given capacity to receivers goroutines, the baseline the queues
// and topics are measured against. With batch, each receiver drains up to
// batchLen items at once without blocking after its first.
func Handoff(b *testing.B, capacity, batchLen int, batch bool, receivers int) {
	b.ReportAllocs()
	ch := make(chan int, capacity)
	counts := make([]int, receivers)
	var wg sync.WaitGroup
	b.ResetTimer()
	for r := range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]int, batchLen)
			n := 0
			if !batch {
				for v := range ch {
					buf[0] = v
					n++
				}
				counts[r] = n
				return
			}
			for {
				v, ok := <-ch
				if !ok {
					break
				}
				buf[0] = v
				k := 1
			drain:
				for k < len(buf) {
					select {
					case v, ok := <-ch:
						if !ok {
							break drain
						}
						buf[k] = v
						k++
					default:
						break drain
					}
				}
				n += k
			}
			counts[r] = n
		}()
	}
	for i := range b.N {
		ch <- i
	}
	close(ch)
	wg.Wait()
	b.StopTimer()
	CheckCounts(b, counts)
}

// CheckCounts fails b unless the receivers got b.N items in all.
func CheckCounts(b *testing.B, counts []int) {
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != b.N {
		b.Fatalf("received %d items, want %d", total, b.N)
	}
}
