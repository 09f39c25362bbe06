package kafkatopic_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// racingClose calls call n times, released at once, and the backend's
// Close once under is closed or every call has returned
// (testbroker.RaceClose), and returns, once Close has returned nil, what
// the calls made; the error of each call that failed must wrap
// topic.ErrTopicClosed (what names the call).
func racingClose[T, R any](t *testing.T, round int, b *kafkatopic.Backend[T], under <-chan struct{}, what string, n int, call func(i int) (R, error)) []R {
	t.Helper()
	type result struct {
		r   R
		err error
	}
	calls := make([]func() result, n)
	for i := range calls {
		calls[i] = func() result { r, err := call(i); return result{r, err} }
	}
	results, err := testbroker.RaceClose(under, calls, func() error { return b.Close(context.Background()) })
	if err != nil {
		t.Fatalf("round %d: the backend's Close racing %s = %v, want nil", round, what, err)
	}
	var made []R
	for _, res := range results {
		switch {
		case res.err == nil:
			made = append(made, res.r)
		case !errors.Is(res.err, topic.ErrTopicClosed):
			t.Fatalf("round %d: %s racing the backend's Close = %v, want nil or topic.ErrTopicClosed", round, what, res.err)
		}
	}
	return made
}

// Guarantee: a Subscribe racing the backend's Close (called once the
// cluster has seen the first request of a kind each round, from a group
// join to a first fetch), balanced or broadcast, either subscribes, and the subscription then reports
// topic.ErrSubscriptionClosed once Close has returned, or fails with
// topic.ErrTopicClosed; none panics, races or leaves anything running.
func TestSubscribesRacingTheBackendsCloseSubscribeOrReturnErrTopicClosed(t *testing.T) {
	c := testbroker.Kafka(t)
	modes := []topic.SubscriptionMode{topic.Balanced("g"), topic.Balanced("h"), topic.Broadcast(), topic.Broadcast()}
	for round, key := range []kmsg.Key{kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.ListOffsets, kmsg.Fetch} {
		b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
		h := newTopic(t, b, "subscribing", topic.Options{Mode: topic.Mixed})
		subs := racingClose(t, round, b, testbroker.FirstRequest(c, key), "Subscribe", len(modes), func(i int) (*topic.Subscription[int], error) {
			return h.Subscribe(t.Context(), modes[i], topic.SubscriberOptions{})
		})
		for _, s := range subs {
			if _, err := s.Receive(t.Context()); !errors.Is(err, topic.ErrSubscriptionClosed) {
				t.Fatalf("round %d: Receive of a subscription made while the backend closed = %v, want topic.ErrSubscriptionClosed", round, err)
			}
			s.Close()
		}
		if _, err := h.Subscribe(t.Context(), topic.Broadcast(), topic.SubscriberOptions{}); !errors.Is(err, topic.ErrTopicClosed) {
			t.Fatalf("round %d: Subscribe after the backend's Close = %v, want topic.ErrTopicClosed", round, err)
		}
	}
}

// Guarantee: a topic declared while the backend closes (called once the
// cluster has seen the first topic creation or, later in a declaration,
// the first configuration read of the round) is either made,
// and then closed by that Close (its publishes fail with
// topic.ErrTopicClosed), or refused with topic.ErrTopicClosed; none
// panics, races or leaves anything running.
func TestTopicsDeclaredRacingTheBackendsCloseAreClosedByItOrRefused(t *testing.T) {
	c := testbroker.Kafka(t)
	const declarers = 4
	for round, key := range []kmsg.Key{kmsg.CreateTopics, kmsg.DescribeConfigs, kmsg.DescribeConfigs} {
		b := newBackend(t, testOptions[int](c, topic.IntCodec{}))
		handles := racingClose(t, round, b, testbroker.FirstRequest(c, key), "NewTopic", declarers, func(i int) (*topic.Handle[int], error) {
			return topic.NewTopic(topic.Name(fmt.Sprintf("declared-%d-%d", round, i)), topic.Options{}, topic.Backend[int](b))
		})
		for _, h := range handles {
			if err := h.Publish(t.Context(), 1); !errors.Is(err, topic.ErrTopicClosed) {
				t.Fatalf("round %d: Publish on a topic declared while the backend closed = %v, want topic.ErrTopicClosed", round, err)
			}
			h.Close()
		}
	}
}
