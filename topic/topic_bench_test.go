package topic

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkTopicHop measures moving b.N messages from one publisher
// goroutine through a topic to N subscriber goroutines, beside plain
// buffered channels doing the same hand-off; ns/op and allocs/op are per
// published message.
//
//	balanced/item   balanced-only topic, N members of one group, Receive
//	balanced/batch  the same with ReceiveBatch into 64 items
//	chan/balanced   one channel, N receivers
//	broadcast/item  broadcast-only topic (ring of 1024), N subscribers each
//	                receiving every message (drop_oldest; lagged/op reports
//	                how many deliveries slow subscribers missed)
//	broadcast/nolag the same with a ring as long as the run, so nothing is
//	                missed and every message is received N times
//	broadcast/nolag-batch  the same receiving with ReceiveBatch into 64 items
//	chan/broadcast  one channel per subscriber, the publisher sends to each
//	tracked/balanced tracked PublishFunc into a balanced topic, 1 member
//	                acking each message
func BenchmarkTopicHop(b *testing.B) {
	for _, n := range benchReceivers {
		b.Run(fmt.Sprintf("balanced/item/subs=%d", n), func(b *testing.B) { benchBalanced(b, n, 1) })
	}
	for _, n := range benchReceivers {
		b.Run(fmt.Sprintf("balanced/batch/subs=%d", n), func(b *testing.B) { benchBalanced(b, n, benchBatch) })
	}
	for _, n := range benchReceivers {
		b.Run(fmt.Sprintf("chan/balanced/subs=%d", n), func(b *testing.B) { benchChan(b, false, n) })
	}
	for _, n := range benchReceivers {
		b.Run(fmt.Sprintf("broadcast/item/subs=%d", n), func(b *testing.B) { benchBroadcast(b, n, benchCapacity, 1) })
	}
	for _, n := range benchReceivers {
		b.Run(fmt.Sprintf("broadcast/nolag/subs=%d", n), func(b *testing.B) { benchBroadcast(b, n, 0, 1) })
	}
	for _, n := range benchReceivers {
		b.Run(fmt.Sprintf("broadcast/nolag-batch/subs=%d", n), func(b *testing.B) { benchBroadcast(b, n, 0, benchBatch) })
	}
	for _, n := range benchReceivers {
		b.Run(fmt.Sprintf("chan/broadcast/subs=%d", n), func(b *testing.B) { benchChanFanout(b, n) })
	}
	b.Run("tracked/balanced/subs=1", benchTracked)
}

func benchBalanced(b *testing.B, subs, batch int) {
	b.ReportAllocs()
	h, err := NewTopic[int]("bench", Options{Balanced: BalancedPolicy{Capacity: benchCapacity}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var got atomic.Int64
	for range subs {
		s, err := h.Subscribe(b.Context(), Balanced("g"), SubscriberOptions{})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			buf := make([]Item[int], batch)
			count := 0
			for {
				n, err := s.ReceiveBatch(ctx, buf)
				if err != nil {
					break
				}
				count += n
			}
			got.Add(int64(count))
		}()
	}
	b.ResetTimer()
	for i := range b.N {
		if err := h.Publish(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	h.Close()
	wg.Wait()
	b.StopTimer()
	if got.Load() != int64(b.N) {
		b.Fatalf("received %d of %d", got.Load(), b.N)
	}
}

// benchBroadcast uses a ring of capacity; 0 means one slot per message, so
// that no subscriber can lag and every message is delivered N times.
func benchBroadcast(b *testing.B, subs, capacity, batch int) {
	b.ReportAllocs()
	if capacity == 0 {
		// As long as the run, up to the largest ring a topic may have:
		// past MaxCapacity messages a slow subscriber can lag (lagged/op).
		capacity = min(max(b.N, benchCapacity), MaxCapacity)
	}
	h, err := NewTopic[int]("bench", Options{Mode: BroadcastOnly, Broadcast: BroadcastPolicy{Capacity: capacity}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var got atomic.Int64
	for range subs {
		s, err := h.Subscribe(b.Context(), Broadcast(), SubscriberOptions{})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			count := 0
			buf := make([]Item[int], batch)
			for {
				n, err := s.ReceiveBatch(ctx, buf)
				if err != nil {
					break
				}
				for _, it := range buf[:n] {
					if it.Lagged == 0 {
						count++
					}
				}
			}
			got.Add(int64(count))
		}()
	}
	b.ResetTimer()
	for i := range b.N {
		if err := h.Publish(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	h.Close()
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(h.Stats().Lagged)/float64(b.N), "lagged/op")
	if got.Load()+int64(h.Stats().Lagged) != int64(subs*b.N) {
		b.Fatalf("received %d + lagged %d, want %d", got.Load(), h.Stats().Lagged, subs*b.N)
	}
}

func benchChanFanout(b *testing.B, subs int) {
	b.ReportAllocs()
	chs := make([]chan int, subs)
	var wg sync.WaitGroup
	for i := range chs {
		chs[i] = make(chan int, benchCapacity)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range chs[i] {
			}
		}()
	}
	b.ResetTimer()
	for i := range b.N {
		for _, ch := range chs {
			ch <- i
		}
	}
	for _, ch := range chs {
		close(ch)
	}
	wg.Wait()
}

func benchTracked(b *testing.B) {
	b.ReportAllocs()
	h, err := NewTopic[int]("bench", Options{Balanced: BalancedPolicy{Capacity: benchCapacity}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := h.Tracked(TrackedOptions{MaxInFlight: benchCapacity})
	if err != nil {
		b.Fatal(err)
	}
	s, err := h.Subscribe(b.Context(), Balanced("g"), SubscriberOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var acked atomic.Int64
	done := func(r Result) {
		if r.Outcome == Acked {
			acked.Add(1)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			it, err := s.Receive(ctx)
			if err != nil {
				return
			}
			_ = s.Ack(it.ID)
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		if err := p.PublishFunc(ctx, i, done); err != nil {
			b.Fatal(err)
		}
	}
	for p.InFlight() > 0 {
		// Wait for the last acks (bounded by the receiver's progress).
		runtime.Gosched()
	}
	b.StopTimer()
	p.Close()
	s.Close()
	h.Close()
	wg.Wait()
	if acked.Load() != int64(b.N) {
		b.Fatalf("acked %d of %d", acked.Load(), b.N)
	}
}
