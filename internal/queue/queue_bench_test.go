package queue

import (
	"context"
	"fmt"
	"github.com/boulevard-go/boulevard/internal/benchchan"
	"sync"
	"testing"
)

// benchCapacity is the capacity of both the Queue and the buffered channel
// it is compared with.
const benchCapacity = 1024

// benchBatch is the receive buffer length of the batch variants (and the
// PublishBatch size of the pubbatch variant).
const benchBatch = 64

var benchReceivers = []int{1, 4, 16}

// BenchmarkHandoff measures moving b.N items from one publisher goroutine to
// N receiver goroutines, so ns/op is per item. It includes starting the
// receivers and draining after Close.
//
//	queue/item      Publish one item, Receive into a 1-item buffer
//	queue/batch     Publish one item, Receive into a 64-item buffer
//	queue/pubbatch  PublishBatch 64 items, Receive into a 64-item buffer
//	chan/item       ch <- v, v := <-ch
//	chan/batch      ch <- v; receiver blocks for one value, then takes up to
//	                63 more without blocking (the channel analogue of batch)
func BenchmarkHandoff(b *testing.B) {
	for _, variant := range []string{"item", "batch", "pubbatch"} {
		for _, r := range benchReceivers {
			b.Run(fmt.Sprintf("queue/%s/recv=%d", variant, r), func(b *testing.B) {
				benchQueue(b, variant, r)
			})
		}
	}
	for _, variant := range []string{"item", "batch"} {
		for _, r := range benchReceivers {
			b.Run(fmt.Sprintf("chan/%s/recv=%d", variant, r), func(b *testing.B) {
				benchchan.Handoff(b, benchCapacity, benchBatch, variant == "batch", r)
			})
		}
	}
}

func benchQueue(b *testing.B, variant string, receivers int) {
	b.ReportAllocs()
	q := New[int](benchCapacity)
	ctx := context.Background()
	bufLen := benchBatch
	if variant == "item" {
		bufLen = 1
	}
	counts := make([]int, receivers)
	var wg sync.WaitGroup
	b.ResetTimer()
	for r := range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]int, bufLen)
			n := 0
			for {
				k, err := q.Receive(ctx, buf)
				if err != nil {
					break
				}
				n += k
			}
			counts[r] = n
		}()
	}
	if variant == "pubbatch" {
		batch := make([]int, benchBatch)
		for i := 0; i < b.N; i += len(batch) {
			vs := batch[:min(len(batch), b.N-i)]
			if _, err := q.PublishBatch(ctx, vs); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		for i := range b.N {
			if err := q.Publish(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	}
	q.Close()
	wg.Wait()
	b.StopTimer()
	benchchan.CheckCounts(b, counts)
}

// BenchmarkUncontended measures one goroutine publishing and receiving one
// item, the floor cost of the lock and ring bookkeeping, beside a buffered
// channel send and receive.
func BenchmarkUncontended(b *testing.B) {
	b.Run("queue", func(b *testing.B) {
		b.ReportAllocs()
		q := New[int](benchCapacity)
		ctx := context.Background()
		buf := make([]int, 1)
		for i := 0; b.Loop(); i++ {
			_ = q.Publish(ctx, i)
			_, _ = q.Receive(ctx, buf)
		}
	})
	b.Run("chan", func(b *testing.B) {
		b.ReportAllocs()
		ch := make(chan int, benchCapacity)
		for i := 0; b.Loop(); i++ {
			ch <- i
			<-ch
		}
	})
}
