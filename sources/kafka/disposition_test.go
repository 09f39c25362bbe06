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
		po.Processors.HandleFailed = func(_ context.Context, failed []*message.Message[[]byte]) {
			for _, m := range failed {
				m.SetDisposition(acker.DispositionRetry)
			}
		}
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
