package kafkatopology

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: once the backend's Close has cut its connections at its
// deadline, while the cluster holds one of the requests of a Subscribe
// under way (the group's committed offsets and their coordinator) or of
// the join of a reader it made (the join, the sync), its closing ends at
// once: sarama's retries of the lookups, which then fail at once, do not
// sleep their backoff (Metadata.Retry, here 10s) between attempts
// (testbroker.ClosingPastDeadline). The Subscribe made a reader before
// Close, which Close closed, or failed.
func TestTheBackendsClosingEndsOnceItsDeadlineCutsARequestTheClusterHolds(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.SyncGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			c := testbroker.Kafka(t)
			b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.Config.Metadata.Retry.Backoff = 10 * time.Second })
			q := declare(t, b, topology.New("held"))
			_ = testbroker.ClosingPastDeadline(t, c, key, func() error {
				_, err := q.Subscribe(t.Context())
				return err
			}, b.Close)
		})
	}
}

// Guarantee: a group reader's closing, which its Close leaves behind at
// its deadline, ends within Options.AdminTimeout (here 2s) of that
// deadline and testbroker.CloseMargin, room for a stalled machine, while the cluster holds the
// reader's heartbeat: the closing cuts the reader's connections at
// AdminTimeout, and sarama's retries of the coordinator lookups of its
// final commit and leave, which then fail at once, do not sleep their
// backoff (Metadata.Retry, here 10s) between attempts. A later Close waits
// for that closing.
func TestAReadersClosingEndsWithinTheAdminTimeoutWhileTheClusterHoldsItsHeartbeat(t *testing.T) {
	c := testbroker.Kafka(t)
	const deadline, adminTimeout = 300 * time.Millisecond, 2 * time.Second
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) {
		o.Config.Metadata.Retry.Backoff = 10 * time.Second
		o.AdminTimeout = adminTimeout
	})
	r := subscribe(t, declare(t, b, topology.New("held")))
	select {
	case <-testbroker.HoldFirst(t, c, kmsg.Heartbeat):
	case <-time.After(30 * time.Second):
		t.Fatal("the reader never sent a heartbeat")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the reader's Close while the cluster holds its heartbeat = %v, want context.DeadlineExceeded", err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("a later Close = %v", err)
	}
	took := time.Since(start)
	t.Logf("the closing took %v with a deadline of %v and an AdminTimeout of %v", took.Round(time.Millisecond), deadline, adminTimeout)
	if limit := deadline + adminTimeout + testbroker.CloseMargin; took > limit {
		t.Fatalf("a reader's closing took %v while the cluster held its heartbeat, with a deadline of %v and an AdminTimeout of %v; want at most %v",
			took.Round(time.Millisecond), deadline, adminTimeout, limit)
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
	b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) {
		o.Config.Metadata.Retry.Backoff = 10 * time.Second
		o.Config.Producer.Retry.Backoff = 10 * time.Second
	})
	q := declare(t, b, topology.New("held"))
	if err := testbroker.ClosingPastDeadline(t, c, kmsg.Produce, func() error {
		return q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}})
	}, b.Close); err == nil {
		t.Fatal("a Publish whose produce the backend's Close cut short returned nil")
	}
}
