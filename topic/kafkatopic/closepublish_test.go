package kafkatopic_test

import (
	"context"
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: the backend is safe for concurrent use: publishes racing its
// Close return nil until they fail with topic.ErrTopicClosed, never
// panic nor race, and Close returns nil with nothing of the backend's
// left running; once it has, a publish fails with topic.ErrTopicClosed.
func TestPublishesRacingTheBackendsCloseReturnNilOrErrTopicClosed(t *testing.T) {
	c := testbroker.Kafka(t)
	const rounds, publishers = 3, 4
	for round := range rounds {
		b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
		h := newTopic(t, b, "racing", topic.Options{})
		if err := h.Publish(t.Context(), 0); err != nil {
			t.Fatalf("round %d: Publish before Close = %v", round, err)
		}
		published := make(chan struct{}, publishers)
		errs := wait.Together(publishers, func() error {
			for i := 0; ; i++ {
				if err := h.Publish(t.Context(), i); err != nil {
					return err
				}
				if i == 10 {
					published <- struct{}{}
				}
			}
		})
		for range publishers {
			<-published // every publisher under way
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatalf("round %d: the backend's Close while publishes run = %v, want nil", round, err)
		}
		for range publishers {
			if err := <-errs; !errors.Is(err, topic.ErrTopicClosed) {
				t.Fatalf("round %d: a publish racing the backend's Close = %v, want topic.ErrTopicClosed", round, err)
			}
		}
		if err := h.Publish(t.Context(), -1); !errors.Is(err, topic.ErrTopicClosed) {
			t.Fatalf("round %d: Publish after the backend's Close = %v, want topic.ErrTopicClosed", round, err)
		}
	}
}
