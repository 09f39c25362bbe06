package franz

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// Guarantee: a claim that ends while its partition is paused (its
// processors were stuck past stallTimeout) resumes the partition in the
// client, which would otherwise keep it paused when the group gives it to
// the member again: the new claim would never be fetched. Here the
// handler holds the second record until the claim paused its partition,
// the member then loses it (ILLEGAL_GENERATION on a heartbeat) and claims
// it again, and every record must be handled.
func TestPartitionPausedWhenItsClaimEndedIsFetchedWhenClaimedAgain(t *testing.T) {
	const topic, group, records, window = "events", "g-paused-lost", 150, 5
	c := groupCluster(t, topic, records)
	members := committingMember(t)
	lose := answerNextHeartbeat(c, group, kerr.IllegalGeneration.Code, nil)
	src := ackCommittingSource(t, c, topic, group)
	held := make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	defer release()
	var handled sync.Map
	var calls atomic.Int32
	startPipeline(t, pipeline.Options[[]byte, []byte]{
		Name:            "paused-lost",
		ShutdownTimeout: 10 * time.Second,
		Producer:        producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: window}},
		Processors: processor.Options[[]byte, []byte]{Concurrency: 1, MaxDemand: 1,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				if calls.Add(1) == 2 {
					<-held
				}
				handled.Store(string(m.Data), true)
				return m.Data, nil
			}},
	})
	var m *member
	select {
	case m = <-members: // the commit of the first record
	case <-time.After(wait.Deadline):
		t.Fatal("the member never committed its first record")
	}
	wait.For(t, "the claim to pause its partition", func() bool {
		return len(m.client().PauseFetchPartitions(nil)[topic]) == 1
	})
	_, firstGen := m.client().GroupMetadata()
	lose()
	wait.For(t, "the member to claim the partition again in a new generation", func() bool {
		st := m.Stats()
		return st.GenerationID > firstGen && len(st.Partitions) == 1 && st.Partitions[0].GenerationID == st.GenerationID
	}, func() string { return fmt.Sprintf("stats %+v", m.Stats()) })
	release()
	count := func() int {
		n := 0
		handled.Range(func(any, any) bool { n++; return true })
		return n
	}
	wait.For(t, "every record handled", func() bool { return count() == records },
		func() string { return fmt.Sprintf("%d of %d handled, stats %+v", count(), records, m.Stats()) })
}
