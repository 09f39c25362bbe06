package config_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// Guarantee: publishes into and subscribes to the wired topics racing
// Wired.Close (called once the cluster has seen the first request of a
// kind each round, from a group join to a member's first fetch, so that
// subscribes are under way or done), on a connected Kafka backend, either succeed or fail with
// topic.ErrTopicClosed; a subscription made then ends with
// topic.ErrSubscriptionClosed once Close has returned nil, after which a
// publish fails with topic.ErrTopicClosed. None panics, races or leaves
// anything of the topics or the backend running.
func TestPublishesAndSubscribesRacingWiredCloseSucceedOrReturnErrTopicClosed(t *testing.T) {
	c := testbroker.Kafka(t)
	plan := kafkaOrdersPlan(t, c,
		config.Pipeline{Name: "reader", Subscribes: []config.Subscribe{{Topic: "orders"}}},
		config.Pipeline{Name: "writer", Publishes: []config.Publish{{Topic: "orders"}}})
	connect := func(_ context.Context, spec config.ConnectionSpec) (topic.Backend[int], error) {
		return kafkatopic.New(kafkatopic.Options[int]{
			Brokers:       spec.Brokers,
			Config:        testbroker.SaramaConfig(),
			Codec:         topic.IntCodec{},
			AdminTimeout:  30 * time.Second,
			RevokeTimeout: 2 * time.Second,
			Logger:        slog.New(slog.DiscardHandler),
		})
	}
	const callers = 2
	for round, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.OffsetFetch, kmsg.Fetch} {
		broker := topic.NewBroker[int]()
		w, err := config.BuildContext(t.Context(), broker, plan, config.BuildOptions[int]{Connect: connect})
		if err != nil {
			t.Fatal(err)
		}
		pub, ok := w.Publisher("writer", "orders")
		if !ok {
			t.Fatal("no binding of orders for the writer")
		}
		sub := w.Subscriptions("reader")[0]
		start := make(chan struct{})
		published := make(chan error, callers)
		subscribed := make(chan error, callers)
		subs := make(chan *topic.Subscription[int], callers)
		for range callers {
			go func() {
				<-start
				for i := 0; ; i++ {
					if err := pub.Handle.Publish(t.Context(), i); err != nil {
						published <- err
						return
					}
				}
			}()
			go func() {
				<-start
				s, err := sub.Binding.Handle.Subscribe(t.Context(), sub.Mode, topic.SubscriberOptions{})
				if err == nil {
					subs <- s
				}
				subscribed <- err
			}()
		}
		underWay := testbroker.FirstRequest(c, key)
		closed := make(chan error, 1)
		go func() {
			<-underWay
			closed <- w.Close(context.Background())
		}()
		close(start)
		if err := <-closed; err != nil {
			t.Fatalf("round %d: Wired.Close racing publishes and subscribes = %v, want nil", round, err)
		}
		for range callers {
			if err := <-published; !errors.Is(err, topic.ErrTopicClosed) {
				t.Fatalf("round %d: a publish racing Wired.Close = %v, want topic.ErrTopicClosed", round, err)
			}
			if err := <-subscribed; err != nil && !errors.Is(err, topic.ErrTopicClosed) {
				t.Fatalf("round %d: a Subscribe racing Wired.Close = %v, want nil or topic.ErrTopicClosed", round, err)
			}
		}
		close(subs)
		for s := range subs {
			if _, err := s.Receive(t.Context()); !errors.Is(err, topic.ErrSubscriptionClosed) {
				t.Fatalf("round %d: Receive of a subscription made while Wired closed = %v, want topic.ErrSubscriptionClosed", round, err)
			}
			s.Close()
		}
		if err := pub.Handle.Publish(t.Context(), -1); !errors.Is(err, topic.ErrTopicClosed) {
			t.Fatalf("round %d: Publish after Wired.Close = %v, want topic.ErrTopicClosed", round, err)
		}
		broker.Close()
	}
}
