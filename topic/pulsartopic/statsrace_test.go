package pulsartopic_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a topic's Stats may be read from several goroutines while
// subscribers of several groups and broadcast subscribers subscribe and
// close, and while the topic closes (run with -race); once every
// subscriber closed, they count none.
func TestStatsMayBeReadWhileSubscribersComeAndGoAndTheTopicCloses(t *testing.T) {
	const subscribers, rounds, readers = 4, 3, 3
	b := testbroker.Pulsar(t)
	be := newBackend(t, testOptions[int](b, topic.IntCodec{}))
	h := newHandle(t, be, "stats-race", topic.Options{Mode: topic.Mixed})

	done := make(chan struct{})
	var reading sync.WaitGroup
	for range readers {
		reading.Go(func() {
			for {
				st := h.Stats()
				if st.BalancedGroups < 0 || st.BalancedGroups > subscribers || st.BroadcastSubscribers < 0 || st.BroadcastSubscribers > subscribers {
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
	errs := make(chan error, 2*subscribers*rounds)
	for i := range subscribers {
		for _, mode := range []topic.SubscriptionMode{topic.Balanced(topic.GroupName(fmt.Sprint("g", i%2))), topic.Broadcast()} {
			churn.Go(func() {
				for range rounds {
					s, err := h.Subscribe(ctxT(t), mode, topic.SubscriberOptions{})
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
