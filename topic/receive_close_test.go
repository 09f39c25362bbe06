package topic_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: closing a subscription, or its topic, wakes a Receive
// waiting on it, which returns ErrSubscriptionClosed (never an empty item
// without an error), for a group member and a broadcast subscriber alike.
func TestCloseWakesAWaitingReceiveWithErrSubscriptionClosed(t *testing.T) {
	closers := map[string]func(*topic.Handle[int], *topic.Subscription[int]){
		"subscription": func(_ *topic.Handle[int], sub *topic.Subscription[int]) { sub.Close() },
		"topic":        func(h *topic.Handle[int], _ *topic.Subscription[int]) { h.Close() },
	}
	for _, mode := range []topic.SubscriptionMode{topic.Balanced("g"), topic.Broadcast()} {
		for closed, closeIt := range closers {
			t.Run(map[bool]string{false: "balanced", true: "broadcast"}[mode.IsBroadcast()]+"/"+closed, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newIntTopic(t, topic.Options{Mode: topic.Mixed})
					sub := subscribeInt(t, h, mode)
					type received struct {
						it  topic.Item[int]
						err error
					}
					got := make(chan received, 1)
					go func() {
						it, err := sub.Receive(t.Context())
						got <- received{it, err}
					}()
					synctest.Wait() // Receive waits: nothing was published
					closeIt(h, sub)
					synctest.Wait()
					select {
					case r := <-got:
						if !errors.Is(r.err, topic.ErrSubscriptionClosed) {
							t.Fatalf("waiting Receive = %+v, %v; want ErrSubscriptionClosed", r.it, r.err)
						}
					default:
						t.Fatalf("Receive still waits once its %s is closed", closed)
					}
				})
			})
		}
	}
}
