package franz

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: a commit whose offsets were picked while the member held a
// partition that it then lost (its session ended: ILLEGAL_GENERATION on a
// heartbeat) never carries the lost claim's offset in the generation the
// member joins next: by then the partition may be another claim's, which
// has not handled those records, and the commit would move its offset.
// Here the member's first commit is held between picking its offsets and
// sending them until the member has lost the partition, rejoined and
// claimed it again in a new generation whose handler holds its first
// record; no commit of that generation may carry an offset past 0.
func TestCommitOfALostClaimDoesNotGoOutInTheNextGeneration(t *testing.T) {
	const topic, group, records = "events", "g-lost-commit", 20
	c := groupCluster(t, topic, records)

	// The member's first commit waits after picking its offsets.
	stalled, resume := holdFirstCommit(t)
	// The next heartbeat of the group is refused: the member loses its
	// partition and joins again.
	lose := answerNextHeartbeat(c, group, kerr.IllegalGeneration.Code, nil)
	var mu sync.Mutex
	var violations []string
	firstGen := int32(-1)
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		mu.Lock()
		defer mu.Unlock()
		if r.Group != group || firstGen < 0 || r.Generation == firstGen {
			return nil, nil, false
		}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.Offset > 0 {
					violations = append(violations, fmt.Sprintf("generation %d committed offset %d, handled nothing", r.Generation, rp.Offset))
				}
			}
		}
		return nil, nil, false
	})

	src, err := New(Options{
		Brokers:        c.ListenAddrs(),
		GroupID:        group,
		Topics:         []string{topic},
		InitialOffset:  OffsetEarliest,
		CommitMode:     CommitOnAck,
		CommitInterval: time.Hour,
		RevokeTimeout:  2 * time.Second,
		ClientOptions:  fastGroup(),
	})
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	defer release()
	runPipeline(t, "lost", src, func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
		md, _ := message.MetadataAs[*Metadata](m)
		mu.Lock()
		if firstGen < 0 {
			firstGen = md.GenerationID
		}
		later := md.GenerationID != firstGen
		mu.Unlock()
		if later {
			<-held // the new claim handles nothing until the end
		}
		return m.Data, nil
	})

	var m *member
	select {
	case m = <-stalled:
	case <-time.After(wait.Deadline):
		t.Fatal("the member never committed")
	}
	lose()
	wait.For(t, "the member to claim the partition again in a new generation", func() bool {
		st := m.Stats()
		return st.GenerationID > firstGen && len(st.Partitions) == 1 && st.Partitions[0].GenerationID == st.GenerationID
	}, func() string { return fmt.Sprintf("stats %+v", m.Stats()) })
	resume()
	// A commit of the member's waits for the one held to be answered.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.commit(ctx, nil)
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("the lost claim's offsets went out in the next generation: %v", violations)
	}
}
