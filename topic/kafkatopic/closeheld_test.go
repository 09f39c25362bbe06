package kafkatopic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: once the backend's Close has cut its connections at its
// deadline, while the cluster holds one of the requests of a balanced
// Subscribe under way (the group's committed offsets and their
// coordinator, the join, the sync), its closing ends at once: sarama's
// retries of the lookups, which then fail at once, do not sleep their
// backoff (Metadata.Retry, here 10s) between attempts
// (testbroker.ClosingPastDeadline); the Subscribe returns
// topic.ErrTopicClosed.
func TestTheBackendsClosingEndsOnceItsDeadlineCutsARequestTheClusterHolds(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.SyncGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			c := testbroker.Kafka(t)
			opts := testOptions[int](c, topic.IntCodec{})
			opts.Config.Metadata.Retry.Backoff = 10 * time.Second
			b := newBackend(t, opts)
			h := newTopic(t, b, "held", topic.Options{})
			err := testbroker.ClosingPastDeadline(t, c, key, func() error {
				_, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
				return err
			}, b.Close)
			if !errors.Is(err, topic.ErrTopicClosed) {
				t.Fatalf("the Subscribe the backend's Close cut short = %v, want topic.ErrTopicClosed", err)
			}
		})
	}
}

// Guarantee: a balanced subscription's Close returns within
// Options.AdminTimeout (here 2s) and testbroker.CloseMargin, room for a stalled machine,
// while the cluster holds its heartbeat: Close cuts the subscriber's
// connections at AdminTimeout, and sarama's retries of the coordinator
// lookups of its final commit and leave, which then fail at once, do not
// sleep their backoff (Metadata.Retry, here 10s) between attempts.
func TestASubscriptionsCloseReturnsWithinTheAdminTimeoutWhileTheClusterHoldsItsHeartbeat(t *testing.T) {
	c := testbroker.Kafka(t)
	opts := testOptions[int](c, topic.IntCodec{})
	opts.Config.Metadata.Retry.Backoff = 10 * time.Second
	opts.AdminTimeout = 2 * time.Second
	b := newBackend(t, opts)
	s := subscribe(t, newTopic(t, b, "held", topic.Options{}), topic.Balanced("g"))
	select {
	case <-testbroker.HoldFirst(t, c, kmsg.Heartbeat):
	case <-time.After(patience):
		t.Fatal("the subscriber never sent a heartbeat")
	}
	start := time.Now()
	s.Close()
	took := time.Since(start)
	t.Logf("Close took %v with an AdminTimeout of %v", took.Round(time.Millisecond), opts.AdminTimeout)
	if limit := opts.AdminTimeout + testbroker.CloseMargin; took > limit {
		t.Fatalf("a subscription's Close took %v while the cluster held its heartbeat, with an AdminTimeout of %v; want at most %v",
			took.Round(time.Millisecond), opts.AdminTimeout, limit)
	}
}

// Guarantee: once the backend's Close has cut its connections at its
// deadline, while the cluster holds the produce of a Publish under way,
// its closing ends at once: the producer's lookups of the partition's new
// leader and its retries of the send, which then fail at once, do not
// sleep their backoffs (Metadata.Retry and Producer.Retry, here
// 10s each) between attempts (testbroker.ClosingPastDeadline); the Publish
// fails.
func TestTheBackendsClosingEndsOnceItsDeadlineCutsAProduceTheClusterHolds(t *testing.T) {
	c := testbroker.Kafka(t)
	opts := testOptions[int](c, topic.IntCodec{})
	opts.Config.Metadata.Retry.Backoff = 10 * time.Second
	opts.Config.Producer.Retry.Backoff = 10 * time.Second
	b := newBackend(t, opts)
	h := newTopic(t, b, "held", topic.Options{})
	if err := testbroker.ClosingPastDeadline(t, c, kmsg.Produce, func() error { return h.Publish(t.Context(), 1) }, b.Close); err == nil {
		t.Fatal("a Publish whose produce the backend's Close cut short returned nil")
	}
}
