package readertest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// StatsWhileSubscribersChurn reads h's Stats from several goroutines while
// others subscribe to h and close again, each a few times, members of two
// balanced groups and broadcast subscribers, each Subscribe within ctx; it
// then closes h while the readings go on. t fails when a Subscribe fails,
// when a reading counts more groups or broadcast subscribers than ever
// subscribed, or when Stats, once every subscriber closed, count any. h
// must take both balanced and broadcast subscribers (topic.Mixed). Run
// with -race, it shows a Stats that reads what subscribing and closing
// change without their lock.
func StatsWhileSubscribersChurn(t testing.TB, ctx context.Context, h *topic.Handle[int]) {
	t.Helper()
	const subscribers, rounds, readers = 4, 3, 3
	done := make(chan struct{})
	var reading sync.WaitGroup
	for range readers {
		reading.Go(func() {
			for {
				st := h.Stats()
				if st.BalancedGroups < 0 || st.BalancedGroups > 2 || st.BroadcastSubscribers < 0 || st.BroadcastSubscribers > subscribers {
					panic(fmt.Sprintf("Stats %+v count subscribers that never were", st))
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	var churn sync.WaitGroup
	errs := make(chan error, 2*subscribers)
	for i := range subscribers {
		for _, mode := range []topic.SubscriptionMode{topic.Balanced(topic.GroupName(fmt.Sprint("g", i%2))), topic.Broadcast()} {
			churn.Go(func() {
				for range rounds {
					s, err := h.Subscribe(ctx, mode, topic.SubscriberOptions{})
					if err != nil {
						errs <- fmt.Errorf("Subscribe(%v): %w", mode, err)
						return
					}
					s.Close()
				}
			})
		}
	}
	churn.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := h.Stats(); st.BalancedGroups != 0 || st.BroadcastSubscribers != 0 {
		t.Errorf("Stats once every subscriber closed = %+v, want no group nor broadcast subscriber", st)
	}
	h.Close()
	close(done)
	reading.Wait()
}
