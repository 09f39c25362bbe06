package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// Guarantee: under the default FailureCommit policy, a record whose handler
// returns ctx.Err() because the stop cut the drain short is not committed
// past: after the stop the group's commit stays at that record, and the
// next run handles it.
func TestShutdownInterruptedRecordNotCommitted(t *testing.T) {
	eachClient(t, func(t *testing.T, cl client) {
		c := newCluster(t, 1)
		ends := produce(t, c, 1, 0, 20)
		group := "g-interrupted"
		const stuck = 5
		l := newLedger()
		entered := make(chan struct{})
		var once sync.Once
		po := pipelineOpts("interrupted", cl.new(t, sourceOptions(c, group)), 1, l, nil)
		po.ShutdownTimeout = 300 * time.Millisecond
		po.Processors.Concurrency = 1
		po.Processors.MaxDemand = 1
		po.Processors.Handle = func(ctx context.Context, m *message.Message[[]byte]) ([]byte, error) {
			md, _ := message.MetadataAs[*kafka.Metadata](m)
			if md.Offset == stuck && md.GenerationID == 1 {
				once.Do(func() { close(entered) })
				<-ctx.Done()
				return nil, ctx.Err()
			}
			l.add(md)
			return m.Data, nil
		}
		p := startPipeline(t, po)
		select {
		case <-entered:
		case <-time.After(20 * time.Second):
			t.Fatal("the handler never reached the record to interrupt")
		}
		wait.Within(t, 10*time.Second, "the records before it committed", func() bool { return committed(c, group)[0] == stuck })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := p.Stop(ctx) // cut short after ShutdownTimeout: the handler's ctx is cancelled
		t.Logf("stop: %v", err)
		if got := committed(c, group)[0]; got != stuck {
			t.Fatalf("committed %d after a stop that interrupted offset %d; want %d", got, stuck, stuck)
		}
		second := startPipeline(t, pipelineOpts("second", cl.new(t, sourceOptions(c, group)), 1, l, nil))
		wait.Within(t, 20*time.Second, "every record after the restart", func() bool { return l.covers(ends) })
		wait.Within(t, 10*time.Second, "commits at the end", func() bool { return equalOffsets(committed(c, group), ends) })
		stopPipeline(t, second)
	})
}
