package kafka_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: a message whose failure hook sets DispositionRetry is
// redelivered even under the default FailureCommit policy.
func TestRetryDispositionRedelivers(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts = 1
		group := "g-retry"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, 50)
		l := newLedger()
		var mu sync.Mutex
		attempts := 0
		const target = 20
		po := pipelineOpts("retry", cl.new(t, sourceOptions(c, group)), 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			if md.Offset != target {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			attempts++
			if attempts == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		})
		po.Processors.HandleFailed = disposeAll(acker.DispositionRetry)
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, p)
		mu.Lock()
		defer mu.Unlock()
		if attempts != 2 {
			t.Fatalf("offset %d attempted %d times; DispositionRetry must redeliver it once", target, attempts)
		}
		if !l.handled(rec{0, target}) {
			t.Fatal("the retried record was never handled successfully")
		}
	})
}

// Guarantee: Stats counts, per claimed partition, the failed messages that
// the failure policy commit committed past (DispositionDefault), and not
// those a hook discarded nor those that succeeded.
func TestStatsCountFailedMessagesCommittedPast(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		const parts, n = 2, 120 // 60 records per partition
		group := "g-failed-committed"
		c := newCluster(t, parts)
		ends := produce(t, c, parts, 0, n)
		src := cl.new(t, sourceOptions(c, group))
		l := newLedger()
		// Partition 0 fails every fifth record (12), of which the hook
		// discards those at multiples of 20 (3); partition 1 fails none.
		po := pipelineOpts("failed-committed", src, 1, l, func(m *message.Message[[]byte]) error {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			if md.Partition == 0 && md.Offset%5 == 0 {
				return errors.New("fails")
			}
			return nil
		})
		po.Processors.HandleFailed = func(_ context.Context, failed []*message.Message[[]byte]) {
			for _, m := range failed {
				if md, _ := message.MetadataAs[*kafka.Metadata](m); md.Offset%20 == 0 {
					m.SetDisposition(acker.DispositionDiscard)
				}
			}
		}
		p := startPipeline(t, po)
		wait.Within(t, 20*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		got := map[int32]int64{}
		for _, ps := range onlyMember(t, src).Partitions {
			got[ps.Partition] = ps.FailedCommitted
		}
		stopPipeline(t, p)
		if want := map[int32]int64{0: 9, 1: 0}; !equalOffsets(got, want) {
			t.Fatalf("FailedCommitted per partition = %v, want %v", got, want)
		}
	})
}
