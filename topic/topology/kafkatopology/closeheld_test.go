package kafkatopology

import (
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
// sleep their backoff (Metadata.Retry, here 1s) between attempts
// (testbroker.ClosingPastDeadline). The Subscribe made a reader before
// Close, which Close closed, or failed.
func TestTheBackendsClosingEndsOnceItsDeadlineCutsARequestTheClusterHolds(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.SyncGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			c := testbroker.Kafka(t)
			b := newBackend(t, c.ListenAddrs(), func(o *Options[msg]) { o.Config.Metadata.Retry.Backoff = time.Second })
			q := declare(t, b, topology.New("held"))
			_ = testbroker.ClosingPastDeadline(t, c, key, func() error {
				_, err := q.Subscribe(t.Context())
				return err
			}, b.Close)
		})
	}
}
