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
// backoff (Metadata.Retry, here 1s) between attempts
// (testbroker.ClosingPastDeadline); the Subscribe returns
// topic.ErrTopicClosed.
func TestTheBackendsClosingEndsOnceItsDeadlineCutsARequestTheClusterHolds(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.SyncGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			c := testbroker.Kafka(t)
			opts := testOptions[int](c, topic.IntCodec{})
			opts.Config.Metadata.Retry.Backoff = time.Second
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
