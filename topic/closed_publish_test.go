package topic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: once a topic is closed, publishing into it returns
// ErrTopicClosed at once, in every mode and whether or not its groups and
// broadcast subscribers are still open, and delivers nothing: the open
// subscriptions receive ErrSubscriptionClosed.
func TestClosedTopicRefusesPublishesInEveryMode(t *testing.T) {
	for _, mode := range []topic.Mode{topic.BalancedOnly, topic.BroadcastOnly, topic.Mixed} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newIntTopic(t, topic.Options{Mode: mode})
			subs := recipientsOf(t, h, mode)
			h.Close()
			publishes := map[string]func() error{
				"Publish": func() error { return h.Publish(t.Context(), 1) },
				"TryPublish": func() error {
					_, err := h.TryPublish(2)
					return err
				},
			}
			for name, publish := range publishes {
				done := make(chan error, 1)
				go func() { done <- publish() }()
				select {
				case err := <-done:
					if !errors.Is(err, topic.ErrTopicClosed) {
						t.Fatalf("%s after Close = %v, want ErrTopicClosed", name, err)
					}
				case <-time.After(time.Minute):
					t.Fatalf("%s after Close has not returned in a minute", name)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			for _, s := range subs {
				if it, err := s.Receive(ctx); !errors.Is(err, topic.ErrSubscriptionClosed) {
					t.Fatalf("Receive = %+v, %v; want ErrSubscriptionClosed", it, err)
				}
			}
		})
	}
}
