package franz

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a lost partition lets go at once: it does not wait for its
// in-flight messages (their outcome can no longer be committed, and the
// partition may already be another member's), so the member joins the
// group again without waiting out RevokeTimeout. Here the handler holds
// the first record past the member losing its partition (ILLEGAL_GENERATION
// on a heartbeat); the member must claim the partition again in a new
// generation, which it would do only once RevokeTimeout (a minute, past
// the wait) passed if the loss waited for that record.
func TestLostPartitionDoesNotWaitForItsInFlightMessages(t *testing.T) {
	const topic, group, records = "events", "g-lost-at-once", 5
	const revokeTimeout = time.Minute // past wait.Deadline; below the RebalanceTimeout set below
	c := groupCluster(t, topic, records)
	lose := answerNextHeartbeat(c, group, kerr.IllegalGeneration.Code, nil)
	src := groupSource(t, c, topic, group, func(o *Options) {
		o.CommitInterval, o.RevokeTimeout = time.Hour, revokeTimeout
		o.ClientOptions = append(o.ClientOptions, kgo.RebalanceTimeout(2*time.Minute))
	})
	held, holding := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	defer release()
	var once sync.Once
	firstGen := int32(-1)
	runPipeline(t, "lost-at-once", src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		first := false
		once.Do(func() { first = true })
		if first {
			md, _ := message.MetadataAs[*Metadata](m)
			firstGen = md.GenerationID
			close(holding)
			<-held // in flight until the end
		}
		return m.Data, nil
	})
	select {
	case <-holding:
	case <-time.After(wait.Deadline):
		t.Fatal("no record reached the handler")
	}
	lose()
	wait.For(t, "the member to claim the partition again in a new generation", func() bool {
		ms := src.Stats().Members
		return len(ms) == 1 && ms[0].GenerationID > firstGen && len(ms[0].Partitions) == 1 &&
			ms[0].Partitions[0].GenerationID == ms[0].GenerationID
	}, func() string { return fmt.Sprintf("stats %+v", src.Stats()) })
}
