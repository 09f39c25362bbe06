package kafkatopic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
)

// closeDeadline is the deadline the backend's Close is given, and
// closeMargin how long its closing, whose connections Close cut at that
// deadline, may go on after it: room for a busy machine, far below the
// retries of a sarama whose backoff the test sets to seconds.
const (
	closeDeadline = 300 * time.Millisecond
	closeMargin   = time.Second
)

// Guarantee: once the backend's Close has cut its connections at its
// deadline, while the cluster holds one of the requests of a balanced
// Subscribe under way (the group's committed offsets and their
// coordinator, the join, the sync), its closing ends at once: sarama's
// retries of the lookups, which then fail at once, do not sleep their
// backoff (Metadata.Retry, here 1s) between attempts. A later Close, which
// waits for that closing, returns within closeMargin.
func TestTheBackendsClosingEndsOnceItsDeadlineCutsARequestTheClusterHolds(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.SyncGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			c := testbroker.Kafka(t)
			opts := testOptions[int](c, topic.IntCodec{})
			opts.Config.Metadata.Retry.Backoff = time.Second
			b := newBackend(t, opts)
			h := newTopic(t, b, "held", topic.Options{})
			held := testbroker.HoldFirst(t, c, key)
			subscribed := make(chan error, 1)
			go func() {
				_, err := h.Subscribe(t.Context(), topic.Balanced("g"), topic.SubscriberOptions{})
				subscribed <- err
			}()
			select {
			case <-held:
			case <-time.After(patience):
				t.Fatalf("the subscriber never sent a %s request", key.Name())
			}
			ctx, cancel := context.WithTimeout(context.Background(), closeDeadline)
			defer cancel()
			if err := b.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the backend's Close while the cluster holds a %s request = %v, want context.DeadlineExceeded", key.Name(), err)
			}
			start := time.Now()
			if err := b.Close(context.Background()); err != nil {
				t.Fatalf("a later Close = %v", err)
			}
			took := time.Since(start)
			t.Logf("the closing went on %v past Close's deadline", took.Round(time.Millisecond))
			if took > closeMargin {
				t.Fatalf("the backend's closing went on %v past Close's %v deadline, which cut the %s request the cluster held; want at most %v",
					took.Round(time.Millisecond), closeDeadline, key.Name(), closeMargin)
			}
			if err := <-subscribed; !errors.Is(err, topic.ErrTopicClosed) {
				t.Fatalf("the Subscribe the backend's Close cut short = %v, want topic.ErrTopicClosed", err)
			}
		})
	}
}
