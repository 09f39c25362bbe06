package topic_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: closing a tracked publisher stops a Publish of it that waits
// for room in a full group: that Publish returns ErrPublisherClosed, with
// nothing published, even though its own ctx never ends.
func TestTrackedCloseStopsAPublishWaitingForRoom(t *testing.T) {
	for _, mode := range []topic.Mode{topic.BalancedOnly, topic.Mixed} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newIntTopic(t, topic.Options{Mode: mode, Balanced: topic.BalancedPolicy{Capacity: 1}})
				sub := subscribeInt(t, h, topic.Balanced("g"))
				if err := h.Publish(t.Context(), 1); err != nil { // fills the group
					t.Fatal(err)
				}
				p, err := h.Tracked(topic.TrackedOptions{Timeout: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					_, err := p.Publish(context.Background(), 2)
					done <- err
				}()
				synctest.Wait() // the publish waits for room
				p.Close()
				var err2 error
				select {
				case err2 = <-done:
				case <-time.After(time.Minute):
					t.Error("Publish still waits for room a minute after its publisher was closed")
					// Make room, so that the publish returns and the test ends.
					if _, err := sub.Receive(t.Context()); err != nil {
						t.Fatal(err)
					}
					<-done
					return
				}
				if !errors.Is(err2, topic.ErrPublisherClosed) {
					t.Fatalf("waiting Publish returned %v after Close, want ErrPublisherClosed", err2)
				}
				if it, err := sub.Receive(t.Context()); err != nil || it.Value != 1 {
					t.Fatalf("Receive = %+v, %v; want the value 1", it, err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				if it, err := sub.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("second Receive = %+v, %v; want nothing published by the closed publisher", it, err)
				}
				if st := h.Stats(); st.Published != 1 || st.InFlight != 0 {
					t.Fatalf("Stats = %+v; want Published 1, InFlight 0", st)
				}
			})
		})
	}
}
