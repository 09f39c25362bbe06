package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a running Kafka source keeps none of the record values it
// delivered once their messages are handled and their offsets committed:
// neither its message slots, its read-ahead nor the client's fetch buffers
// hold them. A client may keep the last batch it fetched from a partition
// (the franz source holds at most one fetched batch a partition until its
// reader wakes), so the values checked are those of a first round of
// records, followed by one more record a partition that is handled and
// committed too.
func TestARunningKafkaSourceKeepsNoHandledValue(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 3
		c := newCluster(t, parts)
		n := records(600)
		ends := produce(t, c, parts, 0, n)
		l := newLedger()
		src := cl.new(t, sourceOptions(c, "g-retain"))
		var mu sync.Mutex
		var ws []weak.Pointer[byte]
		first := true
		p := startPipeline(t, pipeline.Options[[]byte, []byte]{
			Name:     "retain",
			Producer: producer.Options[[]byte]{Source: src},
			Processors: processor.Options[[]byte, []byte]{
				Concurrency: 4,
				Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
					md, _ := message.MetadataAs[*kafka.Metadata](m)
					mu.Lock()
					if first {
						ws = append(ws, weak.Make(&m.Data[0]))
					}
					mu.Unlock()
					l.add(md)
					return m.Data, nil
				},
			},
		})
		defer stopPipeline(t, p)
		settled := func(ends map[int32]int64) func() bool {
			return func() bool { return l.covers(ends) && equalOffsets(committed(c, "g-retain"), ends) }
		}
		wait.Within(t, loadWait(30*time.Second, 600), "every record handled and committed", settled(ends))
		mu.Lock()
		first = false
		mu.Unlock()
		nextRecordSettled(t, c, parts, n, ends, loadWait(30*time.Second, 600), settled(ends))
		mu.Lock()
		defer mu.Unlock()
		if len(ws) != n {
			t.Fatalf("%d values seen, want %d", len(ws), n)
		}
		if live := wait.Reachable(ws); live > 0 {
			t.Errorf("%d of %d values still reachable from the running source after they were handled and committed", live, n)
		}
	})
}

// nextRecordSettled produces one more record a partition (numbered from
// n), adds them to ends, and waits within d until settled holds: a client
// may keep the last batch it fetched from a partition until it fetches
// the next, so a check that values are not kept comes after this.
func nextRecordSettled(t *testing.T, c *kfake.Cluster, parts, n int, ends map[int32]int64, d time.Duration, settled func() bool) {
	t.Helper()
	for p, k := range produce(t, c, int32(parts), n, parts) {
		ends[p] += k
	}
	wait.Within(t, d, "the next records handled and committed", settled)
}

// waitBothAssigned waits until group has two members, each assigned some
// partition.
func waitBothAssigned(t *testing.T, c *kfake.Cluster, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.WaitGroupInfo(ctx, group, func(gi *kfake.GroupInfo) bool {
		return len(gi.Members) == 2 && gi.Members[0].NumAssigned() > 0 && gi.Members[1].NumAssigned() > 0
	}); err != nil {
		t.Fatalf("the group did not rebalance onto both members: %v", err)
	}
}
